package controller_test

// End-to-end tests of controllers on the in-memory controllertest.Client,
// inside testing/synctest bubbles so that backoff, requeue delays and resync
// elapse without sleeping.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/setpoint-dev/setpoint/engine/controller/controllertest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

var (
	widgets    = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	widgetKind = controller.Kind{Resource: widgets, Kind: "Widget", Namespaced: true}
	cmKind     = controller.Kind{Resource: configMaps, Kind: "ConfigMap", Namespaced: true}
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newWidget(name, size string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"name": name, "size": size},
	}}
}

// widgetPlugin is the Widget plugin of DESIGN.md in native Go: one ConfigMap
// per widget holding its size, and status.state.
type widgetPlugin struct {
	calls atomic.Int64
}

func (p *widgetPlugin) Reconcile(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	p.calls.Add(1)
	name, size := req.Object.String("metadata", "name"), req.Object.String("spec", "size")
	child := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"labels":{"app":"widget"}},"data":{"size":%q}}`, name+"-config", size)
	return &abi.ReconcileResponse{
		Status:   abi.RawJSON(`{"state":"Provisioned"}`),
		Children: []abi.RawJSON{abi.RawJSON(child)},
		Events:   nil,
	}, nil
}

func newController(t *testing.T, c controller.Client, name string, r controller.Reconciler, mod func(*controller.Options)) *controller.Controller {
	t.Helper()
	opts := controller.Options{
		Name: name, Client: c, For: widgetKind, Owns: []controller.Kind{cmKind},
		Reconciler: r, Logger: quietLogger(), Workers: 2,
	}
	if mod != nil {
		mod(&opts)
	}
	ctl, err := controller.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return ctl
}

// runManager runs a manager with ctls until the returned stop is called;
// stop waits for Run to return.
func runManager(t *testing.T, ctls ...*controller.Controller) (*controller.Manager, func()) {
	t.Helper()
	m := controller.NewManager(controller.ManagerOptions{Logger: quietLogger()})
	for _, c := range ctls {
		m.Put(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Manager.Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return m, stop
}

func create(t *testing.T, c controller.Client, gvr schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := c.Create(context.Background(), gvr, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func get(t *testing.T, c controller.Client, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	out, err := c.Get(context.Background(), gvr, "default", name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s %s: %v", gvr.Resource, name, err)
	}
	return out
}

// ready returns the Ready condition's status, reason and message.
func ready(u *unstructured.Unstructured) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

func observedGeneration(u *unstructured.Unstructured) int64 {
	g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return g
}

func events(t *testing.T, c controller.Client, reason string) []unstructured.Unstructured {
	t.Helper()
	list, err := c.List(context.Background(), controller.EventsResource, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []unstructured.Unstructured
	for _, e := range list.Items {
		if r, _, _ := unstructured.NestedString(e.Object, "reason"); r == reason {
			out = append(out, e)
		}
	}
	return out
}

func TestFakeConvergesAndStaysQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		plugin := &widgetPlugin{}
		_, stop := runManager(t, newController(t, c, "widget", plugin, func(o *controller.Options) { o.ResyncPeriod = time.Minute }))
		defer stop()
		for i := range 5 {
			create(t, c, widgets, newWidget(fmt.Sprintf("w%d", i), "small"))
		}
		synctest.Wait()
		for i := range 5 {
			w := get(t, c, widgets, fmt.Sprintf("w%d", i))
			if s, r, _ := ready(w); s != "True" || r != controller.ReasonReconciled {
				t.Errorf("w%d: Ready %s/%s, want True/Reconciled", i, s, r)
			}
			if observedGeneration(w) != w.GetGeneration() {
				t.Errorf("w%d: observedGeneration %d, generation %d", i, observedGeneration(w), w.GetGeneration())
			}
			cm := get(t, c, configMaps, fmt.Sprintf("w%d-config", i))
			if ref := cm.GetOwnerReferences(); len(ref) != 1 || ref[0].UID != w.GetUID() || ref[0].Controller == nil || !*ref[0].Controller {
				t.Errorf("w%d-config: ownerReferences %+v", i, ref)
			}
			if st, _, _ := unstructured.NestedString(w.Object, "status", "state"); st != "Provisioned" {
				t.Errorf("w%d: status.state %q", i, st)
			}
		}
		if n := len(events(t, c, controller.ReasonReconciled)); n != 5 {
			t.Errorf("Reconciled events = %d, want 5", n)
		}
		// Resyncs reconcile again but write nothing: no resourceVersion churn.
		writes := func() [3]int {
			return [3]int{c.Writes("updateStatus", "widgets"), c.Writes("update", "configmaps"), c.Writes("create", "events")}
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

		// A spec edit converges: the child follows, observedGeneration too.
		w := get(t, c, widgets, "w0")
		unstructured.SetNestedField(w.Object, "large", "spec", "size")
		if _, err := c.Update(context.Background(), widgets, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		w = get(t, c, widgets, "w0")
		if w.GetGeneration() != 2 || observedGeneration(w) != 2 {
			t.Errorf("after edit: generation %d observedGeneration %d, want 2 and 2", w.GetGeneration(), observedGeneration(w))
		}
		if size, _, _ := unstructured.NestedString(get(t, c, configMaps, "w0-config").Object, "data", "size"); size != "large" {
			t.Errorf("child data.size = %q, want large", size)
		}
	})
}

func TestFakeChildDeletedByHandIsRecreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		_, stop := runManager(t, newController(t, c, "widget", &widgetPlugin{}, nil))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		old := get(t, c, configMaps, "w-config")
		if err := c.Delete(context.Background(), configMaps, "default", "w-config", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if cm := get(t, c, configMaps, "w-config"); cm.GetUID() == old.GetUID() {
			t.Error("child not recreated")
		}
		// A child edited by hand is put back.
		cm := get(t, c, configMaps, "w-config")
		unstructured.SetNestedField(cm.Object, "tampered", "data", "size")
		if _, err := c.Update(context.Background(), configMaps, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if size, _, _ := unstructured.NestedString(get(t, c, configMaps, "w-config").Object, "data", "size"); size != "small" {
			t.Errorf("data.size = %q after tampering, want small", size)
		}
	})
}

// replicaPlugin keeps spec.replicas ConfigMaps named <owner>-<i>.
func replicaPlugin() controller.Reconciler {
	return controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
		n := req.Object.Int("spec", "replicas")
		name := req.Object.String("metadata", "name")
		resp := &abi.ReconcileResponse{Status: abi.RawJSON(fmt.Sprintf(`{"replicas":%d}`, len(req.Children["ConfigMap"])))}
		for i := range n {
			resp.Children = append(resp.Children, abi.RawJSON(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s-%d"}}`, name, i)))
		}
		return resp, nil
	})
}

func TestFakeScaleUpAndDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		_, stop := runManager(t, newController(t, c, "replicas", replicaPlugin(), nil))
		defer stop()
		// A ConfigMap of the same kind not controlled by the group is never touched.
		create(t, c, configMaps, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "bystander", "namespace": "default"}}})
		g := newWidget("g", "small")
		unstructured.SetNestedField(g.Object, int64(3), "spec", "replicas")
		create(t, c, widgets, g)
		count := func() int {
			list, err := c.List(context.Background(), configMaps, "default", metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return len(list.Items) - 1
		}
		synctest.Wait()
		if n := count(); n != 3 {
			t.Fatalf("children = %d, want 3", n)
		}
		for _, replicas := range []int64{5, 1, 0} {
			g = get(t, c, widgets, "g")
			unstructured.SetNestedField(g.Object, replicas, "spec", "replicas")
			if _, err := c.Update(context.Background(), widgets, g, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if n := count(); n != int(replicas) {
				t.Errorf("replicas %d: children = %d", replicas, n)
			}
		}
		get(t, c, configMaps, "bystander")
	})
}

func TestFakeErrorBacksOffAndShowsInReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		reg := prometheus.NewRegistry()
		metrics, err := controller.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var attempts []int
		var at []time.Duration
		start := time.Now()
		failing := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, req.Attempt)
			at = append(at, time.Since(start))
			if len(attempts) <= 4 {
				return &abi.ReconcileResponse{Error: "quota exceeded"}, nil
			}
			return &abi.ReconcileResponse{}, nil
		})
		_, stop := runManager(t, newController(t, c, "flaky", failing, func(o *controller.Options) { o.Metrics = metrics }))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if s, r, msg := ready(get(t, c, widgets, "w")); s != "False" || r != controller.ReasonReconcileFailed || msg != "quota exceeded" {
			t.Errorf("Ready = %s/%s/%q, want False/ReconcileFailed/quota exceeded", s, r, msg)
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
			if gap, want := at[i]-at[i-1], 5*time.Millisecond<<(i-1); gap != want {
				t.Errorf("gap before attempt %d = %v, want %v", i, gap, want)
			}
		}
		w := get(t, c, widgets, "w")
		if s, _, _ := ready(w); s != "True" {
			t.Errorf("Ready = %s after recovery", s)
		}
		// The failing status was written once, not once per attempt.
		if n := c.Writes("updateStatus", "widgets"); n != 2 {
			t.Errorf("status writes = %d, want 2 (failed, then ready)", n)
		}
		if n := len(events(t, c, controller.ReasonReconcileFailed)); n != 1 {
			t.Errorf("ReconcileFailed events = %d, want 1", n)
		}
		result := func(r string) float64 {
			return testutil.ToFloat64(mustCounter(t, reg, "setpoint_controller_reconcile_total", "flaky", r))
		}
		if got := result("error"); got != 4 {
			t.Errorf("reconcile_total{result=error} = %v, want 4", got)
		}
		if got := result("success"); got != 1 {
			t.Errorf("reconcile_total{result=success} = %v, want 1", got)
		}
		if got := testutil.ToFloat64(mustCounter(t, reg, "setpoint_workqueue_retries_total", "flaky", "")); got != 4 {
			t.Errorf("workqueue retries = %v, want 4", got)
		}
	})
}

// mustCounter finds one counter series by controller (or queue) name and,
// when result is set, by result.
func mustCounter(t *testing.T, reg *prometheus.Registry, metric, name, result string) prometheus.Collector {
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
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"}, func() float64 { return m.GetCounter().GetValue() })
			}
		}
	}
	t.Fatalf("no %s for %s %s", metric, name, result)
	return nil
}

func TestFakeTerminalErrorWaitsForGenerationChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		var calls atomic.Int64
		r := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			calls.Add(1)
			if req.Object.String("spec", "size") == "huge" {
				return &abi.ReconcileResponse{Error: "size huge is not offered", Terminal: true}, nil
			}
			return &abi.ReconcileResponse{}, nil
		})
		_, stop := runManager(t, newController(t, c, "strict", r, func(o *controller.Options) { o.ResyncPeriod = time.Minute }))
		defer stop()
		create(t, c, widgets, newWidget("w", "huge"))
		synctest.Wait()
		time.Sleep(10 * time.Minute) // backoff and resyncs would call again
		synctest.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("plugin called %d times for a terminal error, want 1", n)
		}
		if s, r, _ := ready(get(t, c, widgets, "w")); s != "False" || r != controller.ReasonTerminalError {
			t.Errorf("Ready = %s/%s, want False/TerminalError", s, r)
		}
		w := get(t, c, widgets, "w")
		unstructured.SetNestedField(w.Object, "small", "spec", "size")
		if _, err := c.Update(context.Background(), widgets, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s, _, _ := ready(get(t, c, widgets, "w")); s != "True" {
			t.Errorf("Ready = %s after the fix, want True", s)
		}
	})
}

func TestFakeFailingControllerDoesNotSlowOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		trap := controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			return nil, errors.New("wasm trap: unreachable")
		})
		gadgets := controller.Kind{Resource: schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "gadgets"}, Kind: "Gadget", Namespaced: true}
		_, stop := runManager(t,
			newController(t, c, "trapping", trap, func(o *controller.Options) { o.For = gadgets; o.Owns = nil; o.Workers = 1 }),
			newController(t, c, "widget", &widgetPlugin{}, nil))
		defer stop()
		for i := range 20 {
			g := newWidget(fmt.Sprintf("g%d", i), "small")
			g.SetKind("Gadget")
			create(t, c, gadgets.Resource, g)
		}
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		if s, _, _ := ready(get(t, c, widgets, "w")); s != "True" {
			t.Errorf("widget Ready = %s while another plugin traps", s)
		}
		g, err := c.Get(context.Background(), gadgets.Resource, "default", "g0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s, r, msg := ready(g); s != "False" || r != controller.ReasonPluginError || msg == "" {
			t.Errorf("gadget Ready = %s/%s/%q, want False/PluginError", s, r, msg)
		}
	})
}

func TestFakePanicBecomesError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		r := controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			panic("nil map")
		})
		_, stop := runManager(t, newController(t, c, "panicky", r, nil))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		if s, r, _ := ready(get(t, c, widgets, "w")); s != "False" || r != controller.ReasonPluginError {
			t.Errorf("Ready = %s/%s, want False/PluginError", s, r)
		}
	})
}

func TestFakeFinalizer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		var finalizeCalls atomic.Int64
		fin := controller.FinalizerFunc(func(_ context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
			n := finalizeCalls.Add(1)
			if len(req.Children["ConfigMap"]) != 1 {
				return &abi.FinalizeResponse{Error: fmt.Sprintf("children %v", req.Children)}, nil
			}
			if n < 3 {
				return &abi.FinalizeResponse{RequeueAfter: time.Second}, nil
			}
			return &abi.FinalizeResponse{Done: true}, nil
		})
		_, stop := runManager(t, newController(t, c, "widget", &widgetPlugin{}, func(o *controller.Options) { o.Finalizer = fin }))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		w := get(t, c, widgets, "w")
		if f := w.GetFinalizers(); len(f) != 1 || f[0] != "setpoint.dev/widget" {
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
		if _, err := c.Get(context.Background(), configMaps, "default", "w-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("child after finalize: err = %v, want not found (collected)", err)
		}
		if n := finalizeCalls.Load(); n != 3 {
			t.Errorf("finalize calls = %d, want 3", n)
		}
	})
}

func TestFakeConflictRetriedFromFreshState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		var conflicts atomic.Int64
		c.Fail = func(verb string, gvr schema.GroupVersionResource, _, name string) error {
			if verb == "updateStatus" && conflicts.Add(1) <= 2 {
				return apierrors.NewConflict(gvr.GroupResource(), name, errors.New("stale"))
			}
			return nil
		}
		plugin := &widgetPlugin{}
		_, stop := runManager(t, newController(t, c, "widget", plugin, nil))
		defer stop()
		start := time.Now()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		// Ready without any time passing: the conflicts were retried at once
		// from fresh state, not through backoff.
		if s, _, _ := ready(get(t, c, widgets, "w")); s != "True" || time.Since(start) != 0 {
			t.Errorf("Ready = %s after %v", s, time.Since(start))
		}
		// At least three calls for the two conflicts and the success (more
		// when the event of the created child arrives in between), and
		// nothing written twice.
		if n := plugin.calls.Load(); n < 3 {
			t.Errorf("plugin calls = %d, want at least 3", n)
		}
		if n := c.Writes("updateStatus", "widgets"); n != 1 {
			t.Errorf("status writes = %d, want 1", n)
		}
		if n := c.Writes("create", "configmaps"); n != 1 {
			t.Errorf("child creates = %d, want 1", n)
		}
	})
}

func TestFakeManagerSwapsAndRemoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		state := func(s string) controller.Reconciler {
			return controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
				return &abi.ReconcileResponse{Status: abi.RawJSON(`{"state":"` + s + `"}`)}, nil
			})
		}
		m, stop := runManager(t, newController(t, c, "widget", state("v1"), nil))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		stateOf := func() string {
			s, _, _ := unstructured.NestedString(get(t, c, widgets, "w").Object, "status", "state")
			return s
		}
		if s := stateOf(); s != "v1" {
			t.Fatalf("state = %q, want v1", s)
		}
		m.Put(newController(t, c, "widget", state("v2"), nil))
		synctest.Wait()
		if s := stateOf(); s != "v2" {
			t.Fatalf("after swap: state = %q, want v2", s)
		}
		m.Remove("widget")
		synctest.Wait()
		if names := m.Names(); len(names) != 0 {
			t.Fatalf("Names = %v after Remove", names)
		}
		w := get(t, c, widgets, "w")
		unstructured.SetNestedField(w.Object, "large", "spec", "size")
		if _, err := c.Update(context.Background(), widgets, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if g := observedGeneration(get(t, c, widgets, "w")); g != 1 {
			t.Errorf("a removed controller reconciled: observedGeneration %d", g)
		}
	})
}

func TestFakeInformerRelistsAfterExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		var watchFails atomic.Bool
		c.Fail = func(verb string, gvr schema.GroupVersionResource, _, _ string) error {
			if verb == "watch" && gvr == configMaps && watchFails.Load() {
				return apierrors.NewServiceUnavailable("store restarting")
			}
			return nil
		}
		_, stop := runManager(t, newController(t, c, "widget", &widgetPlugin{}, nil))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		// The child watch ends with 410 and cannot restart for a while; the
		// child is deleted meanwhile: the relist must notice and recreate it.
		watchFails.Store(true)
		c.Compact()
		synctest.Wait()
		old := get(t, c, configMaps, "w-config")
		if err := c.Delete(context.Background(), configMaps, "default", "w-config", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		watchFails.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if cm := get(t, c, configMaps, "w-config"); cm.GetUID() == old.GetUID() {
			t.Error("child deleted during the outage was not recreated")
		}
	})
}

func TestFakeInformerResumesAfterWatchEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		_, stop := runManager(t, newController(t, c, "widget", &widgetPlugin{}, func(o *controller.Options) { o.ResyncPeriod = -1 }))
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
		if s, _, _ := ready(get(t, c, widgets, "w2")); s != "True" {
			t.Errorf("w2 Ready = %q after the watch resumed", s)
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

func TestFakeManagerFollowsLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		el := &toggleElector{leads: make(chan struct{})}
		m := controller.NewManager(controller.ManagerOptions{Elector: el, Logger: quietLogger()})
		m.Put(newController(t, c, "widget", &widgetPlugin{}, nil))
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
		if s, _, _ := ready(get(t, c, widgets, "w1")); s != "True" {
			t.Fatalf("Ready = %q while leading", s)
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
		if s, _, _ := ready(get(t, c, widgets, "w2")); s != "True" {
			t.Fatalf("Ready = %q after leading again", s)
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

func TestFakeTerminalFinalizeErrorIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := controllertest.New()
		var calls atomic.Int64
		fin := controller.FinalizerFunc(func(context.Context, *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
			calls.Add(1)
			return &abi.FinalizeResponse{Error: "volume is attached elsewhere", Terminal: true}, nil
		})
		_, stop := runManager(t, newController(t, c, "widget", &widgetPlugin{}, func(o *controller.Options) {
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
		time.Sleep(10 * time.Minute)
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
