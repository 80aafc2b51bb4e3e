package controller_test

// End-to-end tests on the real parts — the engine's object service on a
// Badger store in a temp dir — run inside testing/synctest bubbles, so that
// backoff, requeue delays and resyncs elapse without sleeping and
// synctest.Wait tells when everything has settled. The instrumented Client
// around the real one counts writes and injects faults.

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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

func TestConvergesAndStaysQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		plugin := &gizmoPlugin{state: "Provisioned"}
		_, stop := runManager(t, newController(t, c, "widget", plugin, func(o *controller.Options) { o.ResyncPeriod = time.Minute }))
		defer stop()
		for i := range 5 {
			create(t, c, widgets, newWidget(fmt.Sprintf("w%d", i), "small"))
		}
		synctest.Wait()
		for i := range 5 {
			if !isReady(t, c, fmt.Sprintf("w%d", i)) {
				t.Errorf("w%d not Ready with observedGeneration = generation", i)
			}
		}
		if n := len(events(t, c, controller.ReasonReconciled)); n != 5 {
			t.Errorf("Reconciled events = %d, want 5", n)
		}
		// Resyncs reconcile again but write nothing: no resourceVersion churn.
		writes := func() [3]int {
			return [3]int{c.Writes("updateStatus", "widgets"), c.Writes("update", "gizmos"), c.Writes("create", "events")}
		}
		before, calls := writes(), plugin.calls.Load()
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		if plugin.calls.Load() < calls+15 {
			t.Errorf("resync: plugin calls %d -> %d, want 15 more", calls, plugin.calls.Load())
		}
		if after := writes(); after != before {
			t.Errorf("resync wrote: (status, child updates, events) %v -> %v", before, after)
		}
	})
}

func TestChildTamperedOrDeletedIsRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		_, stop := runManager(t, newController(t, c, "widget", &gizmoPlugin{}, func(o *controller.Options) { o.ResyncPeriod = -1 }))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		g := get(t, c, gizmos, "w-gizmo")
		unstructured.SetNestedField(g.Object, "tampered", "spec", "size")
		if _, err := c.Update(context.Background(), gizmos, g, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if size := gizmoSize(c, "w-gizmo"); size != "small" {
			t.Errorf("spec.size = %q after tampering, want small", size)
		}
		if err := c.Delete(context.Background(), gizmos, "default", "w-gizmo", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if g2 := get(t, c, gizmos, "w-gizmo"); g2.GetUID() == g.GetUID() {
			t.Error("child not recreated")
		}
	})
}

func TestScaleLeavesOthersAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		_, stop := runManager(t, newController(t, c, "replicas", &gizmoPlugin{}, nil))
		defer stop()
		// A Gizmo not controlled by the widget is never touched.
		create(t, c, gizmos, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": "g-gizmo-4", "namespace": "default"}, "spec": map[string]any{"size": "mine"}}})
		w := newWidget("g", "small")
		unstructured.SetNestedField(w.Object, int64(3), "spec", "replicas")
		create(t, c, widgets, w)
		owned := func() int {
			l, err := c.List(context.Background(), gizmos, "default", metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return len(l.Items) - 1
		}
		synctest.Wait()
		if n := owned(); n != 3 {
			t.Fatalf("children = %d, want 3", n)
		}
		// Scaling to 5 wants g-gizmo-4, a name another object holds: the
		// widget reports it and leaves that object alone.
		updateWidget(t, c, "g", func(w *unstructured.Unstructured) {
			unstructured.SetNestedField(w.Object, int64(5), "spec", "replicas")
		})
		synctest.Wait()
		if s, r, msg := ready(get(t, c, widgets, "g")); s != "False" || r != controller.ReasonApplyFailed {
			t.Errorf("Ready = %s/%s/%q, want False/ApplyFailed", s, r, msg)
		}
		if size := gizmoSize(c, "g-gizmo-4"); size != "mine" {
			t.Errorf("bystander spec.size = %q, want mine", size)
		}
		for _, replicas := range []int64{1, 0} {
			updateWidget(t, c, "g", func(w *unstructured.Unstructured) {
				unstructured.SetNestedField(w.Object, replicas, "spec", "replicas")
			})
			synctest.Wait()
			if n := owned(); n != int(replicas) {
				t.Errorf("replicas %d: children = %d", replicas, n)
			}
			if !isReady(t, c, "g") {
				t.Errorf("replicas %d: not Ready", replicas)
			}
		}
		get(t, c, gizmos, "g-gizmo-4")
	})
}

func TestErrorBacksOffAndShowsInReadyAndMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		reg := prometheus.NewRegistry()
		metrics, err := controller.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var attempts []int
		var at []time.Time
		failing := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, req.Attempt)
			at = append(at, time.Now())
			if len(attempts) <= 4 {
				return &abi.ReconcileResponse{Error: "quota exceeded"}, nil
			}
			return &abi.ReconcileResponse{}, nil
		})
		_, stop := runManager(t, newController(t, c, "flaky", failing, func(o *controller.Options) { o.Metrics = metrics }))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		if s, r, msg := ready(get(t, c, widgets, "w")); s != "False" || r != controller.ReasonReconcileFailed ||
			msg != "quota exceeded (attempt 1, retrying with backoff)" {
			t.Errorf("Ready = %s/%s/%q, want False/ReconcileFailed/quota exceeded (attempt 1, ...)", s, r, msg)
		}
		time.Sleep(16 * time.Millisecond) // attempts 2 and 3, at 5 and 15 ms
		synctest.Wait()
		if _, _, msg := ready(get(t, c, widgets, "w")); msg != "quota exceeded (attempt 3, retrying with backoff)" {
			t.Errorf("after 16ms: Ready message %q, want attempt 3", msg)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(attempts) != "[0 1 2 3 4]" {
			t.Errorf("attempts = %v, want [0 1 2 3 4]", attempts)
		}
		// Gaps between attempts double: 5, 10, 20, 40 ms.
		for i := 1; i < len(at); i++ {
			if gap, want := at[i].Sub(at[i-1]), 5*time.Millisecond<<(i-1); gap != want {
				t.Errorf("gap before attempt %d = %v, want %v", i, gap, want)
			}
		}
		if !isReady(t, c, "w") {
			t.Error("not Ready after recovery")
		}
		// The condition counts the attempts (one status write per failed
		// attempt, spaced by the backoff), but the event is recorded once.
		if n := c.Writes("updateStatus", "widgets"); n != 5 {
			t.Errorf("status writes = %d, want 5 (4 failed attempts, then ready)", n)
		}
		warn := events(t, c, controller.ReasonReconcileFailed)
		if len(warn) != 1 {
			t.Fatalf("ReconcileFailed events = %d, want 1", len(warn))
		}
		if typ, _, _ := unstructured.NestedString(warn[0].Object, "type"); typ != "Warning" {
			t.Errorf("event type = %q, want Warning", typ)
		}
		if got := counter(t, reg, "setpoint_controller_reconcile_total", "flaky", "error"); got != 4 {
			t.Errorf("reconcile_total{result=error} = %v, want 4", got)
		}
		if got := counter(t, reg, "setpoint_controller_reconcile_total", "flaky", "success"); got != 1 {
			t.Errorf("reconcile_total{result=success} = %v, want 1", got)
		}
		if got := counter(t, reg, "setpoint_workqueue_retries_total", "flaky", ""); got != 4 {
			t.Errorf("workqueue retries = %v, want 4", got)
		}
		if n := testutil.CollectAndCount(reg, "setpoint_controller_reconcile_duration_seconds"); n != 1 {
			t.Errorf("duration series = %d, want 1", n)
		}
	})
}

// counter returns a counter's value by controller (or queue) name and, when
// set, result.
func counter(t *testing.T, reg *prometheus.Registry, metric, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if (labels["controller"] == name || labels["name"] == name) && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s for %s %s", metric, name, result)
	return 0
}

func TestTerminalErrorWaitsForGenerationChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var calls atomic.Int64
		r := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			calls.Add(1)
			if req.Object.String("spec", "size") == "large" {
				return &abi.ReconcileResponse{Error: "size large is not offered here", Terminal: true}, nil
			}
			return &abi.ReconcileResponse{}, nil
		})
		_, stop := runManager(t, newController(t, c, "strict", r, func(o *controller.Options) { o.ResyncPeriod = time.Minute }))
		defer func() { stop() }() // the stop of the last run
		create(t, c, widgets, newWidget("w", "large"))
		synctest.Wait()
		time.Sleep(2 * time.Minute) // backoff and resyncs would call again
		synctest.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("plugin called %d times for a terminal error, want 1", n)
		}
		if s, r, _ := ready(get(t, c, widgets, "w")); s != "False" || r != controller.ReasonTerminalError {
			t.Errorf("Ready = %s/%s, want False/TerminalError", s, r)
		}
		// A label change is not a new generation: still not retried.
		updateWidget(t, c, "w", func(w *unstructured.Unstructured) { w.SetLabels(map[string]string{"team": "a"}) })
		synctest.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("plugin called %d times after a label change, want 1", n)
		}
		// A new run (a restart, a new plugin version) tries once more,
		// since what failed may be state the previous process held; then it
		// too waits for a change.
		stop()
		_, stop = runManager(t, newController(t, c, "strict", r, func(o *controller.Options) { o.ResyncPeriod = time.Minute }))
		synctest.Wait()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := calls.Load(); n != 2 {
			t.Errorf("plugin called %d times in all after a new run, want 2", n)
		}
		updateWidget(t, c, "w", func(w *unstructured.Unstructured) { unstructured.SetNestedField(w.Object, "small", "spec", "size") })
		synctest.Wait()
		if !isReady(t, c, "w") {
			t.Error("not Ready after the spec was fixed")
		}
	})
}

// TestChildRefusedAsInvalidIsTerminal checks that a child the server
// refuses as invalid (422) fails the reconcile terminally: writing it again
// cannot succeed until the plugin's output changes.
func TestChildRefusedAsInvalidIsTerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var calls atomic.Int64
		r := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			calls.Add(1)
			label := req.Object.String("spec", "size")
			if label == "large" {
				label = strings.Repeat("x", 64) // longer than a label value may be
			}
			return &abi.ReconcileResponse{Children: []abi.RawJSON{abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"Gizmo",` +
				`"metadata":{"name":"` + req.Object.String("metadata", "name") + `-gizmo","labels":{"size":"` + label + `"}},"spec":{"size":"small"}}`)}}, nil
		})
		_, stop := runManager(t, newController(t, c, "strict", r, func(o *controller.Options) { o.ResyncPeriod = time.Minute }))
		defer stop()
		create(t, c, widgets, newWidget("w", "large"))
		synctest.Wait()
		time.Sleep(2 * time.Minute) // backoff and resyncs would call again
		synctest.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("plugin called %d times for a child refused as invalid, want 1", n)
		}
		if s, r, msg := ready(get(t, c, widgets, "w")); s != "False" || r != controller.ReasonTerminalError || !strings.Contains(msg, "must be no more than 63") {
			t.Errorf("Ready = %s/%s (%s), want False/TerminalError with the server's reason", s, r, msg)
		}
		updateWidget(t, c, "w", func(w *unstructured.Unstructured) { unstructured.SetNestedField(w.Object, "small", "spec", "size") })
		synctest.Wait()
		if !isReady(t, c, "w") {
			t.Error("not Ready after the spec was fixed")
		}
	})
}

func TestFailingControllerDoesNotSlowOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		trap := controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			return nil, errors.New("wasm trap: unreachable")
		})
		var widgetDone atomic.Value
		plugin := controller.ReconcilerFunc(func(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			widgetDone.Store(time.Now())
			return &abi.ReconcileResponse{}, nil
		})
		_, stop := runManager(t,
			newController(t, c, "trapping", trap, func(o *controller.Options) { o.For = gizmoKind; o.Owns = nil; o.Workers = 1 }),
			newController(t, c, "widget", plugin, nil))
		defer stop()
		for i := range 30 {
			create(t, c, gizmos, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Gizmo",
				"metadata": map[string]any{"name": fmt.Sprintf("g%d", i), "namespace": "default"}}})
		}
		start := time.Now()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		if !isReady(t, c, "w") {
			t.Error("widget not Ready while another plugin traps")
		}
		if d := widgetDone.Load().(time.Time).Sub(start); d != 0 {
			t.Errorf("widget reconciled after %v of fake time, want at once", d)
		}
		g := get(t, c, gizmos, "g0")
		if s, r, msg := ready(g); s != "False" || r != controller.ReasonPluginError || msg == "" {
			t.Errorf("gizmo Ready = %s/%s/%q, want False/PluginError", s, r, msg)
		}
	})
}

func TestPanicBecomesError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		r := controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			panic("assignment to entry in nil map")
		})
		_, stop := runManager(t, newController(t, c, "panicky", r, nil))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		if s, r, msg := ready(get(t, c, widgets, "w")); s != "False" || r != controller.ReasonPluginError {
			t.Errorf("Ready = %s/%s/%q, want False/PluginError", s, r, msg)
		}
	})
}

func TestFinalizerRunsUntilDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var finalizeCalls atomic.Int64
		fin := controller.FinalizerFunc(func(_ context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
			n := finalizeCalls.Add(1)
			if len(req.Children["Gizmo.example.setpoint.dev"]) != 1 {
				return &abi.FinalizeResponse{Error: fmt.Sprintf("children %v", req.Children)}, nil
			}
			if n < 3 {
				return &abi.FinalizeResponse{RequeueAfter: time.Second}, nil
			}
			return &abi.FinalizeResponse{Done: true}, nil
		})
		_, stop := runManager(t, newController(t, c, "widget", &gizmoPlugin{}, func(o *controller.Options) { o.Finalizer = fin }))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		if f := get(t, c, widgets, "w").GetFinalizers(); len(f) != 1 || f[0] != "setpoint.dev/widget" {
			t.Fatalf("finalizers = %v", f)
		}
		if err := c.Delete(context.Background(), widgets, "default", "w", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s, r, _ := ready(get(t, c, widgets, "w")); s != "False" || r != controller.ReasonFinalizing {
			t.Errorf("while finalizing: Ready = %s/%s", s, r)
		}
		time.Sleep(2*time.Second + time.Millisecond)
		synctest.Wait()
		if _, err := c.Get(context.Background(), widgets, "default", "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("widget after finalize: err = %v, want not found", err)
		}
		if n := finalizeCalls.Load(); n != 3 {
			t.Errorf("finalize calls = %d, want 3", n)
		}
		time.Sleep(time.Minute) // the engine's garbage collector
		synctest.Wait()
		if _, err := c.Get(context.Background(), gizmos, "default", "w-gizmo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("child after finalize: err = %v, want not found (collected)", err)
		}
	})
}

func TestTerminalFinalizeErrorIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var calls atomic.Int64
		fin := controller.FinalizerFunc(func(context.Context, *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
			calls.Add(1)
			return &abi.FinalizeResponse{Error: "volume is attached elsewhere", Terminal: true}, nil
		})
		_, stop := runManager(t, newController(t, c, "widget", &gizmoPlugin{}, func(o *controller.Options) {
			o.Finalizer = fin
			o.ResyncPeriod = time.Minute
		}))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		if err := c.Delete(context.Background(), widgets, "default", "w", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("finalize calls = %d, want 1", n)
		}
		w := get(t, c, widgets, "w")
		if s, r, _ := ready(w); s != "False" || r != controller.ReasonFinalizeTerminal {
			t.Errorf("Ready = %s/%s, want False/%s", s, r, controller.ReasonFinalizeTerminal)
		}
		if len(w.GetFinalizers()) != 1 {
			t.Errorf("finalizers = %v, want the controller's kept", w.GetFinalizers())
		}
	})
}

func TestConflictRetriedFromFreshState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var conflicts atomic.Int64
		c.setFail(func(verb string, gvr schema.GroupVersionResource, name string) error {
			if verb == "updateStatus" && conflicts.Add(1) <= 2 {
				return apierrors.NewConflict(gvr.GroupResource(), name, errors.New("stale"))
			}
			return nil
		})
		plugin := &gizmoPlugin{}
		_, stop := runManager(t, newController(t, c, "widget", plugin, nil))
		defer stop()
		start := time.Now()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		// Ready without any time passing: the conflicts were retried at once
		// from fresh state, not through backoff.
		if !isReady(t, c, "w") || time.Since(start) != 0 {
			t.Errorf("Ready %v after %v", isReady(t, c, "w"), time.Since(start))
		}
		if n := plugin.calls.Load(); n < 3 {
			t.Errorf("plugin calls = %d, want at least 3", n)
		}
		if n := c.Writes("create", "gizmos"); n != 1 {
			t.Errorf("child creates = %d, want 1", n)
		}
	})
}

func TestManagerSwapsAndRemoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		m, stop := runManager(t, newController(t, c, "widget", &gizmoPlugin{state: "v1"}, nil))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		state := func() string {
			s, _, _ := unstructured.NestedString(get(t, c, widgets, "w").Object, "status", "state")
			return s
		}
		if s := state(); s != "v1" {
			t.Fatalf("state = %q, want v1", s)
		}
		m.Put(newController(t, c, "widget", &gizmoPlugin{state: "v2"}, nil))
		synctest.Wait()
		if s := state(); s != "v2" {
			t.Fatalf("after swap: state = %q, want v2", s)
		}
		m.Remove("widget")
		synctest.Wait()
		if names := m.Names(); len(names) != 0 {
			t.Fatalf("Names = %v after Remove", names)
		}
		updateWidget(t, c, "w", func(w *unstructured.Unstructured) { unstructured.SetNestedField(w.Object, "large", "spec", "size") })
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if g := observedGeneration(get(t, c, widgets, "w")); g != 1 {
			t.Errorf("a removed controller reconciled: observedGeneration %d", g)
		}
	})
}

func TestInformerRelistsAfterExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, db, _ := openEngine(t, t.TempDir(), true)
		c := instrument(s)
		_, stop := runManager(t, newController(t, c, "widget", &gizmoPlugin{}, func(o *controller.Options) { o.ResyncPeriod = -1 }))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		create(t, c, widgets, newWidget("x", "small"))
		synctest.Wait()
		// The child watch ends and cannot restart for a while; meanwhile a
		// child is deleted and the store compacts past the cache's
		// resourceVersion. The resumed watch gets 410, and the relist must
		// notice the deletion and have the child recreated.
		var down atomic.Bool
		down.Store(true)
		c.setFail(func(verb string, gvr schema.GroupVersionResource, _ string) error {
			if verb == "watch" && gvr == gizmos && down.Load() {
				return apierrors.NewServiceUnavailable("store restarting")
			}
			return nil
		})
		c.EndWatches()
		synctest.Wait()
		old := get(t, c, gizmos, "w-gizmo")
		if err := c.Delete(context.Background(), gizmos, "default", "w-gizmo", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		updateWidget(t, c, "x", func(w *unstructured.Unstructured) { w.SetLabels(map[string]string{"moved": "on"}) })
		rev, err := db.CurrentRevision(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Compact(context.Background(), rev); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		down.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if g := get(t, c, gizmos, "w-gizmo"); g.GetUID() == old.GetUID() {
			t.Error("child deleted during the outage was not recreated")
		}
	})
}

func TestInformerResumesAfterWatchEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		_, stop := runManager(t, newController(t, c, "widget", &gizmoPlugin{}, func(o *controller.Options) { o.ResyncPeriod = -1 }))
		defer stop()
		create(t, c, widgets, newWidget("w1", "small"))
		synctest.Wait()
		started := c.Watches()
		c.EndWatches()
		synctest.Wait()
		if c.Watches() != started+2 {
			t.Errorf("watches = %d, want %d (both caches resumed)", c.Watches(), started+2)
		}
		create(t, c, widgets, newWidget("w2", "small"))
		synctest.Wait()
		if !isReady(t, c, "w2") {
			t.Error("w2 not Ready after the watch resumed")
		}
	})
}

// toggleElector leads when told to, and loses leadership when told to.
type toggleElector struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	leads  chan struct{}
	rounds atomic.Int64
}

func (e *toggleElector) Lead(ctx context.Context) (context.Context, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-e.leads:
	}
	e.rounds.Add(1)
	lctx, cancel := context.WithCancel(ctx)
	e.mu.Lock()
	e.cancel = cancel
	e.mu.Unlock()
	return lctx, nil
}

func (e *toggleElector) lose() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cancel()
}

func TestManagerFollowsLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		el := &toggleElector{leads: make(chan struct{})}
		m := controller.NewManager(controller.ManagerOptions{Elector: el, Logger: quietLogger()})
		m.Put(newController(t, c, "widget", &gizmoPlugin{}, nil))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()

		create(t, c, widgets, newWidget("w1", "small"))
		synctest.Wait()
		if s, _, _ := ready(get(t, c, widgets, "w1")); s != "" {
			t.Fatalf("reconciled before leading: Ready = %q", s)
		}
		el.leads <- struct{}{}
		synctest.Wait()
		if !isReady(t, c, "w1") {
			t.Fatal("w1 not Ready while leading")
		}
		el.lose()
		synctest.Wait()
		create(t, c, widgets, newWidget("w2", "small"))
		synctest.Wait()
		if s, _, _ := ready(get(t, c, widgets, "w2")); s != "" {
			t.Fatalf("reconciled after losing leadership: Ready = %q", s)
		}
		el.leads <- struct{}{}
		synctest.Wait()
		if !isReady(t, c, "w2") {
			t.Fatal("w2 not Ready after leading again")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if n := el.rounds.Load(); n != 2 {
			t.Errorf("led %d times, want 2", n)
		}
	})
}

func TestRequeueAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var mu sync.Mutex
		var at []time.Duration
		start := time.Now()
		r := controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Since(start))
			return &abi.ReconcileResponse{RequeueAfter: 30 * time.Second}, nil
		})
		_, stop := runManager(t, newController(t, c, "poller", r, func(o *controller.Options) { o.ResyncPeriod = -1 }))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		time.Sleep(95 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(at) != "[0s 30s 1m0s 1m30s]" {
			t.Errorf("reconciled at %v, want [0s 30s 1m0s 1m30s]", at)
		}
	})
}

func TestSwapToVersionWithoutFinalizeReleasesObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		never := controller.FinalizerFunc(func(context.Context, *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
			return &abi.FinalizeResponse{Error: "cannot release", Terminal: true}, nil
		})
		m, stop := runManager(t, newController(t, c, "widget", &gizmoPlugin{}, func(o *controller.Options) { o.Finalizer = never }))
		defer stop()
		create(t, c, widgets, newWidget("kept", "small"))
		create(t, c, widgets, newWidget("deleting", "small"))
		synctest.Wait()
		if err := c.Delete(context.Background(), widgets, "default", "deleting", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s, r, _ := ready(get(t, c, widgets, "deleting")); s != "False" || r != controller.ReasonFinalizeTerminal {
			t.Fatalf("Ready = %s/%s, want stuck on the terminal finalize error", s, r)
		}
		// The next version has no finalize: nothing may stay stuck on the
		// old version's finalizer.
		m.Put(newController(t, c, "widget", &gizmoPlugin{}, nil))
		synctest.Wait()
		if _, err := c.Get(context.Background(), widgets, "default", "deleting", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("deleting widget: err = %v, want not found", err)
		}
		if f := get(t, c, widgets, "kept").GetFinalizers(); len(f) != 0 {
			t.Errorf("kept widget finalizers = %v, want none", f)
		}
	})
}

// TestHammerEditsConverge edits widgets from several goroutines while eight
// workers reconcile them, and checks that no object is ever reconciled by
// two workers at once and that every widget ends Ready at its last
// generation with its child matching its last spec.
func TestHammerEditsConverge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var mu sync.Mutex
		inflight := map[string]bool{}
		base := &gizmoPlugin{state: "ok"}
		r := controller.ReconcilerFunc(func(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			name := req.Object.String("metadata", "name")
			mu.Lock()
			if inflight[name] {
				t.Errorf("%s reconciled by two workers at once", name)
			}
			inflight[name] = true
			mu.Unlock()
			time.Sleep(time.Millisecond) // plugin work, in fake time
			mu.Lock()
			inflight[name] = false
			mu.Unlock()
			return base.Reconcile(ctx, req)
		})
		_, stop := runManager(t, newController(t, c, "widget", r, func(o *controller.Options) { o.Workers = 8 }))
		defer stop()
		const widgetsN, editors, edits = 8, 3, 5
		for i := range widgetsN {
			create(t, c, widgets, newWidget(fmt.Sprintf("w%d", i), "small"))
		}
		sizes := []string{"small", "medium", "large"}
		var wg sync.WaitGroup
		for e := range editors {
			wg.Go(func() {
				for i := range edits {
					name := fmt.Sprintf("w%d", (e*5+i*7)%widgetsN)
					updateWidget(t, c, name, func(w *unstructured.Unstructured) {
						unstructured.SetNestedField(w.Object, sizes[(e+i)%3], "spec", "size")
					})
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		// The plugin sleeps (in fake time), so let time run until every
		// reconcile has finished.
		time.Sleep(time.Minute)
		synctest.Wait()
		for i := range widgetsN {
			name := fmt.Sprintf("w%d", i)
			w := get(t, c, widgets, name)
			if !isReady(t, c, name) {
				s, r, msg := ready(w)
				t.Errorf("%s: not Ready at generation %d (observed %d): %s/%s/%s", name, w.GetGeneration(), observedGeneration(w), s, r, msg)
			}
			want, _, _ := unstructured.NestedString(w.Object, "spec", "size")
			if got := gizmoSize(c, name+"-gizmo"); got != want {
				t.Errorf("%s-gizmo size = %q, want %q", name, got, want)
			}
		}
	})
}
