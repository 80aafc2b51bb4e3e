package plugins

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
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
		kindstest.CheckBuiltEvent(t, ev, fmt.Sprintf("%+v", tc))
	}
}
