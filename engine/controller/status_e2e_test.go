package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/test/testsupport"
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

var (
	gauges    = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "gauges"}
	gaugeKind = controller.Kind{Resource: gauges, Kind: "Gauge", Namespaced: true}
)

// gaugeCRD declares a status the server checks: level is an integer of at
// most 10.
var gaugeCRD = testsupport.CRD{Kind: "Gauge", Status: true, Schema: `
type: object
properties:
  spec:
    type: object
    properties:
      level: {type: integer}
  status:
    type: object
    properties:
      level: {type: integer, maximum: 10}
      observedGeneration: {type: integer}
      conditions:
        type: array
        items: {type: object, x-kubernetes-preserve-unknown-fields: true}
`}

// levelPlugin reports spec.level as status.level, and counts the failures
// the controller records against it.
type levelPlugin struct {
	mu       sync.Mutex
	failures []error
}

func (p *levelPlugin) Reconcile(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return &abi.ReconcileResponse{Status: abi.RawJSON(fmt.Sprintf(`{"level":%d}`, req.Object.Int("spec", "level")))}, nil
}

func (p *levelPlugin) RecordFailure(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = append(p.failures, err)
}

func (p *levelPlugin) failed() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.failures...)
}

// A status the server refuses (here, against the CRD's schema) shows on the
// object as Ready=False with the server's message, in a Warning event, and
// in the plugin's failure count; a valid status later clears it.
func TestStatusRefusedShowsOnObject(t *testing.T) {
	svc := newEngine(t)
	createCRDs(t, svc, gaugeCRD)
	testsupport.Eventually(t, 5*time.Second, "gauges served", func() bool { _, ok := svc.Resource(gauges); return ok })
	p := &levelPlugin{}
	_, stop := runManager(t, newController(t, svc, "gauge", p, func(o *controller.Options) {
		o.For, o.Owns = gaugeKind, nil
	}))
	defer stop()
	g := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Gauge",
		"metadata": map[string]any{"name": "g1", "namespace": "default"},
		"spec":     map[string]any{"level": int64(99)},
	}}
	create(t, svc, gauges, g)
	var msg, reason string
	testsupport.Eventually(t, 10*time.Second, "Ready=False on g1", func() bool {
		var st string
		st, reason, msg = ready(get(t, svc, gauges, "g1"))
		return st == "False"
	})
	if reason != controller.ReasonTerminalError || !strings.Contains(msg, "refused the plugin's status") || !strings.Contains(msg, "status.level") {
		t.Errorf("Ready = False %s %q, want TerminalError naming the refusal and status.level", reason, msg)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(get(t, svc, gauges, "g1").Object, "status", "level"); found {
		t.Errorf("the refused status.level was stored")
	}
	testsupport.Eventually(t, 5*time.Second, "a Warning event", func() bool {
		for _, e := range events(t, svc, controller.ReasonTerminalError) {
			if e.Object["type"] == "Warning" && strings.Contains(e.Object["message"].(string), "status.level") {
				return true
			}
		}
		return false
	})
	if f := p.failed(); len(f) == 0 || !strings.Contains(f[0].Error(), "status refused") {
		t.Errorf("failures recorded = %v, want the refusal", f)
	}

	updateGauge := func(level int64) {
		cur := get(t, svc, gauges, "g1")
		_ = unstructured.SetNestedField(cur.Object, level, "spec", "level")
		if _, err := svc.Update(context.Background(), gauges, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	updateGauge(7)
	testsupport.Eventually(t, 10*time.Second, "Ready=True after a valid status", func() bool {
		obj := get(t, svc, gauges, "g1")
		lvl, _, _ := unstructured.NestedInt64(obj.Object, "status", "level")
		st, _, _ := ready(obj)
		return st == "True" && lvl == 7
	})
}

// A status refused as forbidden is not terminal: the object says why
// (StatusRefused, a Warning event) and the reconcile is retried, and
// succeeds once the server accepts it.
func TestStatusForbiddenIsRetried(t *testing.T) {
	svc := newEngine(t)
	c := instrument(svc)
	var refusals atomic.Int64
	c.setFail(func(verb string, gvr schema.GroupVersionResource, name string) error {
		// The plugin's status write, and only the first one, is refused;
		// the controller's next write (Ready=False) passes.
		if verb == "updateStatus" && name == "w1" && refusals.Add(1) == 1 {
			return apierrors.NewForbidden(widgets.GroupResource(), name, errors.New("status writes are paused"))
		}
		return nil
	})
	p := &levelPlugin{}
	_, stop := runManager(t, newController(t, c, "widget", p, func(o *controller.Options) { o.Owns = nil }))
	defer stop()
	create(t, svc, widgets, newWidget("w1", "small"))
	testsupport.Eventually(t, 10*time.Second, "a StatusRefused Warning event", func() bool {
		for _, e := range events(t, svc, controller.ReasonStatusRefused) {
			if e.Object["type"] == "Warning" && strings.Contains(e.Object["message"].(string), "status writes are paused") {
				return true
			}
		}
		return false
	})
	testsupport.Eventually(t, 10*time.Second, "Ready=True once the status is accepted", func() bool {
		st, _, _ := ready(get(t, svc, widgets, "w1"))
		return st == "True"
	})
	if f := p.failed(); len(f) != 1 || !strings.Contains(f[0].Error(), "forbidden") {
		t.Errorf("failures recorded = %v, want the one refusal", f)
	}
}

// A status larger than the engine stores (1.5 MiB by default) is refused;
// the object's Ready condition says so, where the plugin's author looks,
// and the reconcile is not retried until the object changes.
func TestStatusTooLargeIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		big := abi.RawJSON(`{"state":"ok","blob":"` + strings.Repeat("x", 1600<<10) + `"}`)
		r := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			return &abi.ReconcileResponse{Status: big}, nil
		})
		_, stop := runManager(t, newController(t, c, "bloated", r, nil))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		u := get(t, c, widgets, "w")
		s, reason, msg := ready(u)
		if s != "False" || reason != controller.ReasonTerminalError || !strings.Contains(msg, "request is too large") {
			t.Errorf("Ready = %s/%s %q, want False/TerminalError about the size", s, reason, msg)
		}
		if _, ok := u.Object["status"].(map[string]any)["blob"]; ok {
			t.Error("the oversized status was stored")
		}
	})
}
