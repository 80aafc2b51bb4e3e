package controller_test

// End-to-end tests of controllers on the real parts: the engine's object
// service on a Badger store in a temp dir. Time is real here (Badger and the
// engine run their own goroutines), so these tests wait for conditions with a
// bounded poll and use short backoffs.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/workqueue"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

func engineController(t *testing.T, s *engine.Service, name string, r controller.Reconciler, mod func(*controller.Options)) *controller.Controller {
	return newController(t, s, name, r, func(o *controller.Options) {
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

// reportedGizmos is the gizmo count the plugin wrote to the widget's status.
func reportedGizmos(c controller.Client, name string) string {
	w, err := c.Get(context.Background(), widgets, "default", name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	v, ok, _ := unstructured.NestedFieldNoCopy(w.Object, "status", "gizmos")
	if !ok {
		return ""
	}
	return fmt.Sprint(v)
}

func TestEngineWidgetsConverge(t *testing.T) {
	s := newEngine(t)
	plugin := &gizmoPlugin{state: "Provisioned"}
	_, stop := runManager(t, engineController(t, s, "widget", plugin, func(o *controller.Options) { o.ResyncPeriod = 100 * time.Millisecond }))
	defer stop()
	const n = 30
	for i := range n {
		create(t, s, widgets, newWidget(fmt.Sprintf("w%d", i), "small"))
	}
	// A widget is Ready after its first reconcile, which creates its gizmo
	// and reports none yet; the gizmo's event reconciles it again, and that
	// writes gizmos 1. Wait for the second write too: when the controller
	// starts behind the creates, every second reconcile queues after all
	// the first ones, and one landing after the resourceVersions below are
	// read is not a resync's write.
	testsupport.Eventually(t, 20*time.Second, "all widgets Ready, each reporting its gizmo", func() bool {
		for i := range n {
			name := fmt.Sprintf("w%d", i)
			if !isReady(t, s, name) || reportedGizmos(s, name) != "1" {
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
	testsupport.Eventually(t, 5*time.Second, "a Reconciled event per widget", func() bool {
		return len(events(t, s, controller.ReasonReconciled)) == n
	})

	// Resyncs call the plugin again but write nothing.
	w0rv, g0rv, calls := w.GetResourceVersion(), g.GetResourceVersion(), plugin.calls.Load()
	testsupport.Eventually(t, 10*time.Second, "two resyncs", func() bool { return plugin.calls.Load() >= calls+2*n })
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
	testsupport.Eventually(t, 10*time.Second, "the edit to converge", func() bool {
		return isReady(t, s, "w0") && gizmoSize(s, "w0-gizmo") == "large"
	})

	// A child deleted by hand is recreated.
	if err := s.Delete(context.Background(), gizmos, "default", "w1-gizmo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "w1-gizmo recreated", func() bool {
		g, err := s.Get(context.Background(), gizmos, "default", "w1-gizmo", metav1.GetOptions{})
		return err == nil && g.GetDeletionTimestamp() == nil
	})
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
	testsupport.Eventually(t, 10*time.Second, "w Ready", func() bool { return isReady(t, s, "w") })
	if f := get(t, s, widgets, "w").GetFinalizers(); len(f) != 1 || f[0] != "setpoint.dev/widget" {
		t.Fatalf("finalizers = %v", f)
	}
	if err := s.Delete(context.Background(), widgets, "default", "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "w and its gizmo gone", func() bool {
		_, err1 := s.Get(context.Background(), widgets, "default", "w", metav1.GetOptions{})
		_, err2 := s.Get(context.Background(), gizmos, "default", "w-gizmo", metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2)
	})
	// Events are written by the controller's recorder goroutine, which
	// need not have written this one by the time the collector is done.
	testsupport.Eventually(t, 10*time.Second, "the Deprovisioned event", func() bool { return len(events(t, s, "Deprovisioned")) > 0 })
	if len(events(t, s, "Deprovisioned")) != 1 {
		t.Errorf("Deprovisioned events = %d, want 1", len(events(t, s, "Deprovisioned")))
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
	testsupport.Eventually(t, 20*time.Second, "every widget Ready", func() bool {
		for i := range n {
			if !isReady(t, s, fmt.Sprintf("w%d", i)) {
				return false
			}
		}
		return true
	})
	// The new version starts from a fresh list, so it reconciles every
	// object, including those the old one handled.
	testsupport.Eventually(t, 10*time.Second, "every widget handled by v2", func() bool {
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
	s, _, closeEngine := openEngine(t, dir, true)
	plugin := &gizmoPlugin{state: "ok"}
	_, stop := runManager(t, engineController(t, s, "widget", plugin, nil))
	const n = 30
	for i := range n {
		create(t, s, widgets, newWidget(fmt.Sprintf("w%d", i), "small"))
	}
	testsupport.Eventually(t, 10*time.Second, "some reconciles", func() bool { return plugin.calls.Load() >= 5 })
	stop()
	closeEngine()

	s, _, _ = openEngine(t, dir, false)
	testsupport.Eventually(t, 5*time.Second, "CRDs served after restart", func() bool {
		_, ok := s.Resource(widgets)
		return ok
	})
	_, stop = runManager(t, engineController(t, s, "widget", plugin, nil))
	defer stop()
	testsupport.Eventually(t, 20*time.Second, "every widget Ready after restart", func() bool {
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
