package controller

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDesiredStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	okReady := readyCondition{status: metav1.ConditionTrue, reason: ReasonReconciled, message: "reconciled"}
	failReady := readyCondition{status: metav1.ConditionFalse, reason: ReasonReconcileFailed, message: "boom"}
	readyAt := func(status, reason, msg string, gen int64, at time.Time) map[string]any {
		return map[string]any{"type": "Ready", "status": status, "reason": reason, "message": msg,
			"observedGeneration": gen, "lastTransitionTime": at.Format(time.RFC3339)}
	}
	cond := func(typ, status, at string) map[string]any {
		return map[string]any{"type": typ, "status": status, "lastTransitionTime": at}
	}
	tests := []struct {
		name       string
		observed   map[string]any
		fromPlugin map[string]any
		gen        int64
		ready      readyCondition
		want       map[string]any
		unchanged  bool // want equals observed: no write
	}{
		{name: "first status", gen: 1, ready: okReady, fromPlugin: map[string]any{"state": "ok"},
			want: map[string]any{"state": "ok", "observedGeneration": int64(1), "conditions": []any{readyAt("True", "Reconciled", "reconciled", 1, t1)}}},
		{name: "same state again is unchanged, transition time kept", gen: 1, ready: okReady, fromPlugin: map[string]any{"state": "ok"},
			observed:  map[string]any{"state": "ok", "observedGeneration": int64(1), "conditions": []any{readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			want:      map[string]any{"state": "ok", "observedGeneration": int64(1), "conditions": []any{readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			unchanged: true},
		{name: "new generation bumps observedGeneration", gen: 2, ready: okReady, fromPlugin: map[string]any{"state": "ok"},
			observed: map[string]any{"state": "ok", "observedGeneration": int64(1), "conditions": []any{readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			want:     map[string]any{"state": "ok", "observedGeneration": int64(2), "conditions": []any{readyAt("True", "Reconciled", "reconciled", 2, t0)}}},
		{name: "failure flips Ready and its transition time, keeps plugin's state", gen: 1, ready: failReady,
			observed: map[string]any{"state": "ok", "observedGeneration": int64(1), "conditions": []any{readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			want:     map[string]any{"state": "ok", "observedGeneration": int64(1), "conditions": []any{readyAt("False", "ReconcileFailed", "boom", 1, t1)}}},
		{name: "plugin conditions kept beside Ready, a new one stamped now", gen: 1, ready: okReady,
			fromPlugin: map[string]any{"conditions": []any{map[string]any{"type": "Provisioned", "status": "True"}}},
			want: map[string]any{"observedGeneration": int64(1), "conditions": []any{
				cond("Provisioned", "True", t1.Format(time.RFC3339)), readyAt("True", "Reconciled", "reconciled", 1, t1)}}},
		{name: "plugin conditions again: Ready and theirs keep their transition times, unchanged", gen: 1, ready: okReady,
			fromPlugin: map[string]any{"conditions": []any{map[string]any{"type": "Provisioned", "status": "True"}}},
			observed:   map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Provisioned", "True", t0.Format(time.RFC3339)), readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			want:       map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Provisioned", "True", t0.Format(time.RFC3339)), readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			unchanged:  true},
		{name: "plugin condition that flips is stamped now, Ready keeps its time", gen: 1, ready: okReady,
			fromPlugin: map[string]any{"conditions": []any{map[string]any{"type": "Provisioned", "status": "False", "lastTransitionTime": ""}}},
			observed:   map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Provisioned", "True", t0.Format(time.RFC3339)), readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			want:       map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Provisioned", "False", t1.Format(time.RFC3339)), readyAt("True", "Reconciled", "reconciled", 1, t0)}}},
		{name: "a transition time the plugin sets is its own", gen: 1, ready: okReady,
			fromPlugin: map[string]any{"conditions": []any{cond("Provisioned", "True", "2025-06-01T00:00:00Z")}},
			observed:   map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Provisioned", "True", t0.Format(time.RFC3339)), readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			want:       map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Provisioned", "True", "2025-06-01T00:00:00Z"), readyAt("True", "Reconciled", "reconciled", 1, t0)}}},
		{name: "an unchanged condition stored without a transition time gets none", gen: 1, ready: okReady,
			fromPlugin: map[string]any{"conditions": []any{map[string]any{"type": "Provisioned", "status": "True"}}},
			observed:   map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{"type": "Provisioned", "status": "True"}, readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			want:       map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{"type": "Provisioned", "status": "True"}, readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			unchanged:  true},
		{name: "the plugin's own Ready is replaced, the observed one's time kept", gen: 1, ready: okReady,
			fromPlugin: map[string]any{"conditions": []any{readyAt("True", "Mine", "mine", 1, t1.Add(time.Hour))}},
			observed:   map[string]any{"observedGeneration": int64(1), "conditions": []any{readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			want:       map[string]any{"observedGeneration": int64(1), "conditions": []any{readyAt("True", "Reconciled", "reconciled", 1, t0)}},
			unchanged:  true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before map[string]any
			if tt.observed != nil {
				before = deepCopyJSON(tt.observed).(map[string]any)
			}
			got := desiredStatus(tt.observed, tt.fromPlugin, tt.gen, tt.ready, t1)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if eq := objjson.ValueEqual(tt.observed, got); eq != tt.unchanged {
				t.Errorf("unchanged = %v, want %v", eq, tt.unchanged)
			}
			if diff := cmp.Diff(before, tt.observed); tt.observed != nil && diff != "" {
				t.Errorf("observed modified:\n%s", diff)
			}
		})
	}
}

func TestTerminalAt(t *testing.T) {
	status := func(reason string, gen any) map[string]any {
		return map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": reason, "observedGeneration": gen}}}
	}
	tests := []struct {
		name   string
		status map[string]any
		gen    int64
		want   bool
	}{
		{name: "no status", gen: 1},
		{name: "terminal at this generation", status: status(ReasonTerminalError, int64(3)), gen: 3, want: true},
		{name: "terminal at this generation, decoded as float", status: status(ReasonTerminalError, float64(3)), gen: 3, want: true},
		{name: "terminal at an older generation", status: status(ReasonTerminalError, int64(2)), gen: 3},
		{name: "terminal at a neighbouring generation above 2^53", status: status(ReasonTerminalError, int64(1<<53+1)), gen: 1 << 53},
		{name: "retryable failure", status: status(ReasonReconcileFailed, int64(3)), gen: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := terminalAt(tt.status, tt.gen, ReasonTerminalError); got != tt.want {
				t.Fatalf("terminalAt = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTransitionTimesFollowSetStatusCondition compares the
// lastTransitionTime desiredStatus gives each condition (Ready, and the
// plugin's conditions that leave it empty) with what meta.SetStatusCondition
// gives when the condition is set on the observed list, on random
// observed and new statuses.
func TestTransitionTimesFollowSetStatusCondition(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	statuses := []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
	r := rand.New(rand.NewPCG(19, 20))
	for i := range 2000 {
		var observed []metav1.Condition
		var observedJSON []any
		for _, typ := range []string{ConditionReady, "Provisioned", "Synced"} {
			if r.IntN(3) == 0 {
				continue
			}
			s := statuses[r.IntN(3)]
			observed = append(observed, metav1.Condition{Type: typ, Status: s, LastTransitionTime: metav1.NewTime(t0)})
			observedJSON = append(observedJSON, map[string]any{"type": typ, "status": string(s), "lastTransitionTime": t0.Format(time.RFC3339)})
		}
		var fromPlugin []any
		want := map[string]string{}
		for _, typ := range []string{"Provisioned", "Synced"} {
			if r.IntN(3) == 0 {
				continue
			}
			s := statuses[r.IntN(3)]
			fromPlugin = append(fromPlugin, map[string]any{"type": typ, "status": string(s)})
			want[typ] = setTime(observed, typ, s, t1)
		}
		ready := readyCondition{status: statuses[r.IntN(3)], reason: "R"}
		want[ConditionReady] = setTime(observed, ConditionReady, ready.status, t1)

		var obs map[string]any
		if observedJSON != nil {
			obs = map[string]any{"conditions": observedJSON}
		}
		out := desiredStatus(obs, map[string]any{"conditions": fromPlugin}, 1, ready, t1)
		got := map[string]string{}
		for _, c := range out["conditions"].([]any) {
			m := c.(map[string]any)
			got[m["type"].(string)], _ = m["lastTransitionTime"].(string)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("case %d: observed %v, plugin %v, Ready %s: lastTransitionTime (-meta.SetStatusCondition +desiredStatus):\n%s",
				i, observedJSON, fromPlugin, ready.status, diff)
		}
	}
}

// setTime returns the lastTransitionTime meta.SetStatusCondition gives a
// condition of type typ and status s set at now on a copy of conds.
func setTime(conds []metav1.Condition, typ string, s metav1.ConditionStatus, now time.Time) string {
	conds = append([]metav1.Condition(nil), conds...)
	meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: s, LastTransitionTime: metav1.NewTime(now)})
	return meta.FindStatusCondition(conds, typ).LastTransitionTime.UTC().Format(time.RFC3339)
}
