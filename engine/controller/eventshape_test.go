package controller

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
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
		kindstest.CheckBuiltEvent(t, ev, fmt.Sprintf("%+v", tc))
	}
}
