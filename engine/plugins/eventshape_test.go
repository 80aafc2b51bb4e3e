package plugins

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// TestPluginEventBuiltShape: the Events plugins emit are built in the
// shape the Event kind stores, corev1.Event's encoding with no unknown
// field, since RecordEvent writes them with kinds.WithBuiltShape and the
// engine does not decode them again: decoding one into corev1.Event and
// encoding it gives it back unchanged.
func TestPluginEventBuiltShape(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 27, 3, 4, 5, 678, time.FixedZone("x", 3600)))
	widget := abi.ObjectRef{APIVersion: "example.setpoint.dev/v1", Kind: "Widget", Namespace: "default", Name: "w", UID: "u-1"}
	node := abi.ObjectRef{APIVersion: "v1", Kind: "Node", Name: "n"}
	for _, tc := range []struct {
		regarding abi.ObjectRef
		ns, typ   string
		ev        abi.Event
	}{
		{widget, "default", "Normal", abi.Event{Reason: "Provisioned", Message: "widget w is <Ready> & \u00e9"}},
		{widget, "default", "Warning", abi.Event{}},
		{node, "default", "Normal", abi.Event{Reason: "R", Message: strings.Repeat("m", 2000)}},
	} {
		ev, err := pluginEvent("widget-go", tc.ns, tc.regarding, tc.typ, tc.ev, now)
		if err != nil {
			t.Fatal(err)
		}
		body := map[string]any{}
		for k, v := range ev.Object {
			if k != "apiVersion" && k != "kind" && k != "metadata" {
				body[k] = v
			}
		}
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		var typed corev1.Event
		strict, err := kjson.UnmarshalStrict(data, &typed, kjson.DisallowUnknownFields)
		if err != nil || len(strict) > 0 {
			t.Fatalf("%+v: the Event does not decode strictly: %v %v", tc, err, strict)
		}
		want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&typed)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"apiVersion", "kind", "metadata"} {
			delete(want, k)
		}
		if !reflect.DeepEqual(body, want) {
			t.Errorf("%+v: built\n%v\nwant corev1.Event's encoding\n%v", tc, body, want)
		}
	}
}
