package controller_test

// End-to-end tests of controllers on the real parts: the engine's object
// service on a Badger store in a temp dir. Time is real here (Badger and the
// engine run their own goroutines), so these tests wait for conditions with a
// bounded poll and use short backoffs.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/workqueue"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/store/badger"
)

var (
	gizmos    = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "gizmos"}
	gizmoKind = controller.Kind{Resource: gizmos, Kind: "Gizmo", Namespaced: true}
)

const crdsYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.setpoint.dev}
spec:
  group: example.setpoint.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [name, size]
            properties:
              name: {type: string}
              size: {type: string, enum: [small, medium, large]}
              replicas: {type: integer}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.setpoint.dev}
spec:
  group: example.setpoint.dev
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

// newEngine returns the engine's object service on a fresh Badger store,
// running, with the Widget and Gizmo kinds registered.
func newEngine(t *testing.T) *engine.Service {
	t.Helper()
	s, _ := openEngine(t, t.TempDir(), true)
	return s
}

// openEngine opens the engine on the Badger store in dir, registering the
// kinds when register is set. close stops it and closes the store; it is
// also registered as a cleanup and may be called more than once.
func openEngine(t *testing.T, dir string, register bool) (s *engine.Service, stop func()) {
	t.Helper()
	db, err := badger.Open(dir, badger.Options{})
	if err != nil {
		t.Fatalf("open badger: %v", err)
	}
	s, err = engine.New(context.Background(), engine.Options{Store: db, Logger: quietLogger(), GCInterval: 200 * time.Millisecond})
	if err != nil {
		db.Close()
		t.Fatalf("engine.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			db.Close()
		})
	}
	t.Cleanup(stop)
	if !register {
		return s, stop
	}
	for _, doc := range strings.Split(crdsYAML, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, engine.CRDResource, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD: %v", err)
		}
	}
	eventually(t, 5*time.Second, "CRDs served", func() bool {
		_, w := s.Resource(widgets)
		_, g := s.Resource(gizmos)
		return w && g
	})
	return s, stop
}

// eventually polls cond every 10 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// updateWidget applies change to the current widget, retrying on conflicts
// with the controller's own writes, as any client must.
func updateWidget(t *testing.T, c controller.Client, name string, change func(*unstructured.Unstructured)) {
	t.Helper()
	for range 10 {
		w := get(t, c, widgets, name)
		change(w)
		_, err := c.Update(context.Background(), widgets, w, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatalf("update %s: conflicts persisted", name)
}

// gizmoPlugin provisions one Gizmo per Widget holding its size, or
// spec.replicas Gizmos when set, and reports status.state.
type gizmoPlugin struct {
	state string
	calls atomic.Int64
}

func (p *gizmoPlugin) Reconcile(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	p.calls.Add(1)
	name, size := req.Object.String("metadata", "name"), req.Object.String("spec", "size")
	resp := &abi.ReconcileResponse{Status: abi.RawJSON(fmt.Sprintf(`{"state":%q,"gizmos":%d}`, p.state, len(req.Children["Gizmo.example.setpoint.dev"])))}
	n := int64(1)
	if _, ok := req.Object.Get("spec", "replicas"); ok {
		n = req.Object.Int("spec", "replicas")
	}
	for i := range n {
		child := name + "-gizmo"
		if i > 0 {
			child = fmt.Sprintf("%s-gizmo-%d", name, i)
		}
		resp.Children = append(resp.Children, abi.RawJSON(fmt.Sprintf(
			`{"apiVersion":"example.setpoint.dev/v1","kind":"Gizmo","metadata":{"name":%q},"spec":{"size":%q}}`, child, size)))
	}
	return resp, nil
}

func engineController(t *testing.T, s *engine.Service, name string, r controller.Reconciler, mod func(*controller.Options)) *controller.Controller {
	return newController(t, s, name, r, func(o *controller.Options) {
		o.Owns = []controller.Kind{gizmoKind}
		o.RateLimiter = workqueue.NewExponential[controller.Key](time.Millisecond, 100*time.Millisecond)
		if mod != nil {
			mod(o)
		}
	})
}

func isReady(t *testing.T, c controller.Client, name string) bool {
	w, err := c.Get(context.Background(), widgets, "default", name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	s, _, _ := ready(w)
	return s == "True" && observedGeneration(w) == w.GetGeneration()
}

func gizmoSize(c controller.Client, name string) string {
	g, err := c.Get(context.Background(), gizmos, "default", name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(g.Object, "spec", "size")
	return s
}

func TestEngineWidgetsConverge(t *testing.T) {
	s := newEngine(t)
	plugin := &gizmoPlugin{state: "Provisioned"}
	_, stop := runManager(t, engineController(t, s, "widget", plugin, func(o *controller.Options) { o.ResyncPeriod = 100 * time.Millisecond }))
	defer stop()
	const n = 50
	for i := range n {
		create(t, s, widgets, newWidget(fmt.Sprintf("w%d", i), "small"))
	}
	eventually(t, 20*time.Second, "all widgets Ready", func() bool {
		for i := range n {
			if !isReady(t, s, fmt.Sprintf("w%d", i)) {
				return false
			}
		}
		return true
	})
	w := get(t, s, widgets, "w0")
	g := get(t, s, gizmos, "w0-gizmo")
	if ref := g.GetOwnerReferences(); len(ref) != 1 || ref[0].UID != w.GetUID() || ref[0].Controller == nil || !*ref[0].Controller {
		t.Errorf("w0-gizmo ownerReferences = %+v", ref)
	}
	if st, _, _ := unstructured.NestedString(w.Object, "status", "state"); st != "Provisioned" {
		t.Errorf("status.state = %q", st)
	}
	// The event follows the status write that made an object Ready.
	eventually(t, 5*time.Second, "a Reconciled event per widget", func() bool {
		return len(events(t, s, controller.ReasonReconciled)) == n
	})

	// Resyncs call the plugin again but write nothing.
	w0rv, g0rv, calls := w.GetResourceVersion(), g.GetResourceVersion(), plugin.calls.Load()
	eventually(t, 10*time.Second, "two resyncs", func() bool { return plugin.calls.Load() >= calls+2*n })
	if rv := get(t, s, widgets, "w0").GetResourceVersion(); rv != w0rv {
		t.Errorf("resync rewrote w0: resourceVersion %s -> %s", w0rv, rv)
	}
	if rv := get(t, s, gizmos, "w0-gizmo").GetResourceVersion(); rv != g0rv {
		t.Errorf("resync rewrote w0-gizmo: resourceVersion %s -> %s", g0rv, rv)
	}

	// A spec edit converges.
	updateWidget(t, s, "w0", func(w *unstructured.Unstructured) {
		unstructured.SetNestedField(w.Object, "large", "spec", "size")
	})
	eventually(t, 10*time.Second, "the edit to converge", func() bool {
		return isReady(t, s, "w0") && gizmoSize(s, "w0-gizmo") == "large"
	})

	// A child deleted by hand is recreated.
	if err := s.Delete(context.Background(), gizmos, "default", "w1-gizmo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "w1-gizmo recreated", func() bool {
		g, err := s.Get(context.Background(), gizmos, "default", "w1-gizmo", metav1.GetOptions{})
		return err == nil && g.GetDeletionTimestamp() == nil
	})
}

func TestEngineScaleUpAndDown(t *testing.T) {
	s := newEngine(t)
	_, stop := runManager(t, engineController(t, s, "replicas", &gizmoPlugin{state: "ok"}, nil))
	defer stop()
	w := newWidget("g", "small")
	unstructured.SetNestedField(w.Object, int64(3), "spec", "replicas")
	create(t, s, widgets, w)
	count := func() int {
		l, err := s.List(context.Background(), gizmos, "default", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, g := range l.Items {
			if g.GetDeletionTimestamp() == nil {
				n++
			}
		}
		return n
	}
	eventually(t, 10*time.Second, "3 gizmos", func() bool { return count() == 3 })
	for _, replicas := range []int64{5, 1} {
		updateWidget(t, s, "g", func(w *unstructured.Unstructured) {
			unstructured.SetNestedField(w.Object, replicas, "spec", "replicas")
		})
		eventually(t, 10*time.Second, fmt.Sprintf("%d gizmos", replicas), func() bool { return count() == int(replicas) && isReady(t, s, "g") })
	}
}

func TestEngineFinalizeThenCollect(t *testing.T) {
	s := newEngine(t)
	var finalized sync.Map
	fin := controller.FinalizerFunc(func(_ context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
		name := req.Object.String("metadata", "name")
		if _, again := finalized.LoadOrStore(name, true); !again {
			return &abi.FinalizeResponse{RequeueAfter: 50 * time.Millisecond}, nil
		}
		return &abi.FinalizeResponse{Done: true, Events: []abi.Event{{Type: "Normal", Reason: "Deprovisioned", Message: "gizmos released"}}}, nil
	})
	_, stop := runManager(t, engineController(t, s, "widget", &gizmoPlugin{state: "ok"}, func(o *controller.Options) { o.Finalizer = fin }))
	defer stop()
	create(t, s, widgets, newWidget("w", "small"))
	eventually(t, 10*time.Second, "w Ready", func() bool { return isReady(t, s, "w") })
	if f := get(t, s, widgets, "w").GetFinalizers(); len(f) != 1 || f[0] != "setpoint.dev/widget" {
		t.Fatalf("finalizers = %v", f)
	}
	if err := s.Delete(context.Background(), widgets, "default", "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "w and its gizmo gone", func() bool {
		_, err1 := s.Get(context.Background(), widgets, "default", "w", metav1.GetOptions{})
		_, err2 := s.Get(context.Background(), gizmos, "default", "w-gizmo", metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2)
	})
	if len(events(t, s, "Deprovisioned")) != 1 {
		t.Errorf("Deprovisioned events = %d, want 1", len(events(t, s, "Deprovisioned")))
	}
}

func TestEngineErrorShowsInReadyAndEvents(t *testing.T) {
	s := newEngine(t)
	var calls atomic.Int64
	r := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
		if calls.Add(1) <= 3 {
			return &abi.ReconcileResponse{Error: "backend unavailable"}, nil
		}
		return &abi.ReconcileResponse{}, nil
	})
	_, stop := runManager(t, engineController(t, s, "flaky", r, nil))
	defer stop()
	create(t, s, widgets, newWidget("w", "small"))
	eventually(t, 10*time.Second, "recovery", func() bool { return isReady(t, s, "w") })
	if n := calls.Load(); n != 4 {
		t.Errorf("plugin calls = %d, want 4", n)
	}
	warn := events(t, s, controller.ReasonReconcileFailed)
	if len(warn) != 1 {
		t.Fatalf("ReconcileFailed events = %d, want 1", len(warn))
	}
	if typ, _, _ := unstructured.NestedString(warn[0].Object, "type"); typ != "Warning" {
		t.Errorf("event type = %q, want Warning", typ)
	}
	if name, _, _ := unstructured.NestedString(warn[0].Object, "involvedObject", "name"); name != "w" {
		t.Errorf("event involvedObject.name = %q", name)
	}
}

func TestEngineHotSwapLeavesNothingStuck(t *testing.T) {
	s := newEngine(t)
	m, stop := runManager(t, engineController(t, s, "widget", &gizmoPlugin{state: "v1"}, nil))
	defer stop()
	const n = 40
	for i := range n {
		create(t, s, widgets, newWidget(fmt.Sprintf("w%d", i), "small"))
		if i == n/2 {
			m.Put(engineController(t, s, "widget", &gizmoPlugin{state: "v2"}, nil))
		}
	}
	eventually(t, 20*time.Second, "every widget Ready", func() bool {
		for i := range n {
			if !isReady(t, s, fmt.Sprintf("w%d", i)) {
				return false
			}
		}
		return true
	})
	// The new version starts from a fresh list, so it reconciles every
	// object, including those the old one handled.
	eventually(t, 10*time.Second, "every widget handled by v2", func() bool {
		for i := range n {
			st, _, _ := unstructured.NestedString(get(t, s, widgets, fmt.Sprintf("w%d", i)).Object, "status", "state")
			if st != "v2" {
				return false
			}
		}
		return true
	})
}

func TestEngineRestartMidRunConverges(t *testing.T) {
	dir := t.TempDir()
	s, closeEngine := openEngine(t, dir, true)
	plugin := &gizmoPlugin{state: "ok"}
	_, stop := runManager(t, engineController(t, s, "widget", plugin, nil))
	const n = 30
	for i := range n {
		create(t, s, widgets, newWidget(fmt.Sprintf("w%d", i), "small"))
	}
	eventually(t, 10*time.Second, "some reconciles", func() bool { return plugin.calls.Load() >= 5 })
	stop()
	closeEngine()

	s, _ = openEngine(t, dir, false)
	eventually(t, 5*time.Second, "CRDs served after restart", func() bool {
		_, ok := s.Resource(widgets)
		return ok
	})
	_, stop = runManager(t, engineController(t, s, "widget", plugin, nil))
	defer stop()
	eventually(t, 20*time.Second, "every widget Ready after restart", func() bool {
		for i := range n {
			if !isReady(t, s, fmt.Sprintf("w%d", i)) {
				return false
			}
		}
		return true
	})
	l, err := s.List(context.Background(), gizmos, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != n {
		t.Errorf("gizmos = %d, want %d (one per widget, none duplicated or lost)", len(l.Items), n)
	}
}
