package kinds

import "testing"

// BenchmarkCanonicalEventsV1 measures giving an events.k8s.io/v1 Event's
// fields, as a request sends them, the shape kube-apiserver serves them
// in, which each write through events.k8s.io/v1 does.
func BenchmarkCanonicalEventsV1(b *testing.B) {
	body := map[string]any{
		"regarding": map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget", "namespace": "default", "name": "w",
			"uid": "6c1f0f8e-5b1a-4d7e-9a51-0c3f3d0f2a11"},
		"eventTime": "2026-01-02T03:04:05.000001Z", "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
		"action": "Scale", "reason": "Scaled", "note": "scaled it", "type": "Normal",
		"series": map[string]any{"count": int64(2), "lastObservedTime": "2026-01-02T03:04:06.000001Z"},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := canonicalEventsV1(body); err != nil {
			b.Fatal(err)
		}
	}
}
