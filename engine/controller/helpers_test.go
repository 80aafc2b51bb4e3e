package controller_test

// Helpers of the end-to-end tests: the engine's object service on a Badger
// store in a temp dir with the Widget and Gizmo kinds, a Gizmo-provisioning
// plugin, and an instrumented Client that counts writes and injects faults
// around the real one.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/gc"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

var (
	widgets    = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}
	gizmos     = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "gizmos"}
	widgetKind = controller.Kind{Resource: widgets, Kind: "Widget", Namespaced: true}
	gizmoKind  = controller.Kind{Resource: gizmos, Kind: "Gizmo", Namespaced: true}
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newWidget(name, size string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"name": name, "size": size},
	}}
}

func newController(t *testing.T, c controller.Client, name string, r controller.Reconciler, mod func(*controller.Options)) *controller.Controller {
	t.Helper()
	opts := controller.Options{
		Name: name, Client: c, For: widgetKind, Owns: []controller.Kind{gizmoKind},
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

// widgetCRD and gizmoCRD are the kinds most tests reconcile: a Widget
// whose spec the server checks, and a free-form Gizmo.
var (
	widgetCRD = testsupport.CRD{Kind: "Widget", Status: true, Schema: `
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
`}
	gizmoCRD = testsupport.CRD{Kind: "Gizmo", Status: true}
)

// newEngine returns the engine's object service on a fresh Badger store,
// running with a garbage collector, with the Widget and Gizmo kinds
// registered.
func newEngine(t testing.TB) *engine.Service {
	t.Helper()
	s, _, _ := openEngine(t, t.TempDir(), true)
	return s
}

// openEngine opens the engine on the Badger store in dir, registering the
// kinds when register is set. close stops it and closes the store; it is
// also registered as a cleanup and may be called more than once.
func openEngine(t testing.TB, dir string, register bool) (s *engine.Service, db *badger.DB, stop func()) {
	t.Helper()
	db, err := badger.Open(dir, badger.Options{})
	if err != nil {
		t.Fatalf("open badger: %v", err)
	}
	s, err = engine.New(context.Background(), engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		db.Close()
		t.Fatalf("engine.New: %v", err)
	}
	collector, err := gc.New(s, gc.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		db.Close()
		t.Fatalf("gc.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Go(func() { _ = s.Run(ctx) })
	loops.Go(func() { _ = collector.Run(ctx) })
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			loops.Wait()
			s.Close()
			db.Close()
		})
	}
	t.Cleanup(stop)
	if !register {
		return s, db, stop
	}
	createCRDs(t, s, widgetCRD, gizmoCRD)
	testsupport.Eventually(t, 5*time.Second, "CRDs served", func() bool {
		_, w := s.Resource(widgets)
		_, g := s.Resource(gizmos)
		return w && g
	})
	return s, db, stop
}

// createCRDs creates the CRDs through the engine.
func createCRDs(t testing.TB, s *engine.Service, crds ...testsupport.CRD) {
	t.Helper()
	for _, c := range crds {
		if _, err := s.Create(context.Background(), kinds.CRDResource, c.Unstructured(), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD %s: %v", c.Name(), err)
		}
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

// instrumented is the real Client with counters and fault injection.
type instrumented struct {
	controller.Client

	// fail, when set, is asked before each call; an error is returned
	// instead of making it. verb is get, list, watch, create, update,
	// updateStatus or delete.
	fail atomic.Pointer[func(verb string, gvr schema.GroupVersionResource, name string) error]

	mu      sync.Mutex // guards the fields below
	writes  map[string]int
	watches int
	active  map[watch.Interface]struct{}
	// lists counts, per resource, the lists started (first pages); open
	// counts the watches not stopped yet.
	lists map[string]int
	open  map[string]int
	// held, per resource, blocks the delivery of watch events until it is
	// closed (see Hold).
	held map[string]chan struct{}
}

func instrument(c controller.Client) *instrumented {
	return &instrumented{Client: c, writes: make(map[string]int), active: make(map[watch.Interface]struct{}), held: make(map[string]chan struct{}),
		lists: make(map[string]int), open: make(map[string]int)}
}

func (c *instrumented) setFail(f func(verb string, gvr schema.GroupVersionResource, name string) error) {
	c.fail.Store(&f)
}

func (c *instrumented) check(verb string, gvr schema.GroupVersionResource, name string) error {
	if f := c.fail.Load(); f != nil && *f != nil {
		return (*f)(verb, gvr, name)
	}
	return nil
}

func (c *instrumented) count(verb string, gvr schema.GroupVersionResource, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes[verb+" "+gvr.Resource]++
}

// Writes returns how many writes of verb on resource succeeded.
func (c *instrumented) Writes(verb, resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes[verb+" "+resource]
}

// Watches returns how many watches were started.
func (c *instrumented) Watches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watches
}

// Lists returns how many lists of resource were started.
func (c *instrumented) Lists(resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists[resource]
}

// OpenWatches returns how many watches of resource are not stopped.
func (c *instrumented) OpenWatches(resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open[resource]
}

// EndWatches stops every running watch, as a server closing its streams would.
func (c *instrumented) EndWatches() {
	c.mu.Lock()
	ws := make([]watch.Interface, 0, len(c.active))
	for w := range c.active {
		ws = append(ws, w)
	}
	clear(c.active)
	c.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

func (c *instrumented) Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, o metav1.GetOptions) (*unstructured.Unstructured, error) {
	if err := c.check("get", gvr, name); err != nil {
		return nil, err
	}
	return c.Client.Get(ctx, gvr, ns, name, o)
}

func (c *instrumented) List(ctx context.Context, gvr schema.GroupVersionResource, ns string, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if err := c.check("list", gvr, ""); err != nil {
		return nil, err
	}
	if o.Continue == "" {
		c.mu.Lock()
		c.lists[gvr.Resource]++
		c.mu.Unlock()
	}
	return c.Client.List(ctx, gvr, ns, o)
}

func (c *instrumented) Watch(ctx context.Context, gvr schema.GroupVersionResource, ns string, o metav1.ListOptions) (watch.Interface, error) {
	if err := c.check("watch", gvr, ""); err != nil {
		return nil, err
	}
	inner, err := c.Client.Watch(ctx, gvr, ns, o)
	if err != nil {
		return nil, err
	}
	w := c.gate(gvr.Resource, inner)
	c.mu.Lock()
	c.watches++
	c.open[gvr.Resource]++
	c.active[w] = struct{}{}
	c.mu.Unlock()
	return w, nil
}

func (c *instrumented) Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, o metav1.CreateOptions) (*unstructured.Unstructured, error) {
	if err := c.check("create", gvr, obj.GetName()); err != nil {
		return nil, err
	}
	out, err := c.Client.Create(ctx, gvr, obj, o)
	c.count("create", gvr, err)
	return out, err
}

func (c *instrumented) Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, o metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	if err := c.check("update", gvr, obj.GetName()); err != nil {
		return nil, err
	}
	out, err := c.Client.Update(ctx, gvr, obj, o)
	c.count("update", gvr, err)
	return out, err
}

func (c *instrumented) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, o metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	if err := c.check("updateStatus", gvr, obj.GetName()); err != nil {
		return nil, err
	}
	out, err := c.Client.UpdateStatus(ctx, gvr, obj, o)
	c.count("updateStatus", gvr, err)
	return out, err
}

func (c *instrumented) Delete(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, o metav1.DeleteOptions) error {
	if err := c.check("delete", gvr, name); err != nil {
		return err
	}
	err := c.Client.Delete(ctx, gvr, ns, name, o)
	c.count("delete", gvr, err)
	return err
}

// Hold stops delivering the watch events of resource, in order, until the
// returned release is called: the watchers' caches fall behind the store,
// as they do under load.
func (c *instrumented) Hold(resource string) (release func()) {
	ch := make(chan struct{})
	c.mu.Lock()
	c.held[resource] = ch
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.held[resource] == ch {
			delete(c.held, resource)
		}
		c.mu.Unlock()
		close(ch)
	}
}

// gatedWatch forwards the events of a watch, waiting before each one while
// its resource is held.
type gatedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
	// onStop is called once, by the first Stop.
	onStop func()
}

func (c *instrumented) gate(resource string, inner watch.Interface) watch.Interface {
	g := &gatedWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{}), onStop: func() {
		c.mu.Lock()
		c.open[resource]--
		c.mu.Unlock()
	}}
	go func() {
		defer close(g.out)
		for ev := range inner.ResultChan() {
			c.mu.Lock()
			hold := c.held[resource]
			c.mu.Unlock()
			if hold != nil {
				select {
				case <-hold:
				case <-g.stop:
					return
				}
			}
			select {
			case g.out <- ev:
			case <-g.stop:
				return
			}
		}
	}()
	return g
}

func (g *gatedWatch) ResultChan() <-chan watch.Event { return g.out }

func (g *gatedWatch) Stop() {
	g.once.Do(func() {
		close(g.stop)
		g.inner.Stop()
		g.onStop()
	})
}
