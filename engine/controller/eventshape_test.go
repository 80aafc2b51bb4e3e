package controller

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"
)

// TestEventBuiltShape: the controller's Events are built in the shape the
// Event kind stores, corev1.Event's encoding with no unknown field, since
// the engine takes them without decoding them again (kinds.WithBuiltShape).
func TestEventBuiltShape(t *testing.T) {
	c := &Controller{opts: Options{Name: "widget", Now: func() time.Time {
		return time.Date(2026, 11, 27, 3, 4, 5, 0, time.FixedZone("x", 3600))
	}}}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("example.setpoint.dev/v1")
	obj.SetKind("Widget")
	obj.SetName("w")
	obj.SetNamespace("default")
	obj.SetUID("u-1")
	obj.SetResourceVersion("7")
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion("v1")
	cluster.SetKind("Namespace")
	cluster.SetName("n")
	for _, tc := range []struct {
		about                *unstructured.Unstructured
		typ, reason, message string
	}{
		{obj, "Normal", "Provisioned", "widget w is Ready"},
		{obj, "Warning", "", ""},
		{obj, "Bogus", "R", string(make([]byte, 2000))},
		{cluster, "Normal", "Emptied", "namespace n is empty"},
	} {
		ev, err := c.newEvent(tc.about, tc.typ, tc.reason, tc.message)
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
