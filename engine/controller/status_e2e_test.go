package controller_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// condPlugin reports conditions of its own beside the engine's Ready: one
// with a lastTransitionTime it sets, one left empty as meta.SetStatusCondition
// callers do.
type condPlugin struct{ calls atomic.Int64 }

func (p *condPlugin) Reconcile(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	p.calls.Add(1)
	return &abi.ReconcileResponse{Status: abi.RawJSON(`{"state":"ok","conditions":[` +
		`{"type":"Available","status":"True","reason":"Up","message":"up","lastTransitionTime":"2026-01-01T00:00:00Z"},` +
		`{"type":"Progressing","status":"False","reason":"Done","message":"done"}]}`)}, nil
}

// transitionTimes returns the lastTransitionTime of each condition of w's
// status, by type.
func transitionTimes(t *testing.T, c controller.Client, name string) map[string]string {
	t.Helper()
	conds, _, _ := unstructured.NestedSlice(get(t, c, widgets, name).Object, "status", "conditions")
	out := map[string]string{}
	for _, x := range conds {
		m, _ := x.(map[string]any)
		out[fmt.Sprint(m["type"])] = fmt.Sprint(m["lastTransitionTime"])
	}
	return out
}

// A plugin that reports its own conditions must not make every reconcile
// rewrite status: the Ready condition, and the plugin's conditions that left
// lastTransitionTime empty, keep their transition times while their status
// stays the same.
func TestPluginConditionsKeepTransitionTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		p := &condPlugin{}
		_, stop := runManager(t, newController(t, c, "widget", p, func(o *controller.Options) { o.ResyncPeriod = time.Minute }))
		defer stop()
		create(t, c, widgets, newWidget("w1", "small"))
		synctest.Wait()
		if st, _, _ := ready(get(t, c, widgets, "w1")); st != "True" {
			t.Fatalf("Ready = %q, want True", st)
		}
		first, writes, calls := transitionTimes(t, c, "w1"), c.Writes("updateStatus", "widgets"), p.calls.Load()
		if first["Available"] != "2026-01-01T00:00:00Z" || first["Progressing"] == "<nil>" {
			t.Errorf("transition times after the first reconcile: %v, want Available's own and Progressing's set", first)
		}
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		if p.calls.Load() < calls+3 {
			t.Fatalf("resync: plugin calls %d -> %d, want 3 more", calls, p.calls.Load())
		}
		if w := c.Writes("updateStatus", "widgets"); w != writes {
			t.Errorf("resyncs that changed nothing wrote status %d times", w-writes)
		}
		if now := transitionTimes(t, c, "w1"); fmt.Sprint(now) != fmt.Sprint(first) {
			t.Errorf("transition times moved: %v -> %v", first, now)
		}
	})
}
