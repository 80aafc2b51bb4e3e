package plugins

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestStatusCountersOfOneReplica: a replica that does not report counters
// (Options.ReportsCounters says no) keeps the counts the status has, so that
// replicas sharing a store do not overwrite one another's; the one that
// reports writes its own.
func TestStatusCountersOfOneReplica(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "p", "generation": int64(1)},
		"status":   map[string]any{"calls": int64(40), "errors": int64(2), "lastError": "boom"},
	}}
	cur := &loaded{digest: "sha256:x", counters: &counters{}}
	cur.counters.record(nil)
	for _, tc := range []struct {
		reports bool
		want    map[string]any
	}{
		{reports: false, want: map[string]any{"calls": 40.0, "errors": 2.0, "lastError": "boom"}},
		{reports: true, want: map[string]any{"calls": 1.0, "errors": 0.0, "lastError": nil}},
	} {
		st := newStatus(obj, cur)
		st.reportsCounters = tc.reports
		var got map[string]any
		if err := json.Unmarshal(st.ok(0).Status, &got); err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("reports %t: status.%s = %v, want %v", tc.reports, k, got[k], v)
			}
		}
	}
}
