package kinds

import (
	"testing"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// BenchmarkCoerceEvent measures coercing an Event sent as a request body
// (kubectl's, say): its strict decoding into corev1.Event, which finds
// unknown and mistyped fields, and its encoding again into the stored
// shape. A copy of the object is included, as a write makes one.
func BenchmarkCoerceEvent(b *testing.B) {
	event := kindstest.FromYAML(b, `{apiVersion: v1, kind: Event, metadata: {name: e, namespace: default},
		involvedObject: {apiVersion: example.setpoint.dev/v1, kind: Widget, namespace: default, name: w, uid: 6c1f0f8e-5b1a-4d7e-9a51-0c3f3d0f2a11},
		reason: Reconciled, message: widget reconciled, type: Normal, source: {component: setpoint}, count: 1,
		firstTimestamp: "2026-01-01T00:00:00Z", lastTimestamp: "2026-01-01T00:00:00Z"}`)
	sv, _ := NewRegistry().Get(EventResource)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sv.Coerce(event.DeepCopy()); err != nil {
			b.Fatal(err)
		}
	}
}
