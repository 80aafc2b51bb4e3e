package engine

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestCRDReadThrough: Services share a store, as replicas do. A CRD created
// through one is served by the others at their first request (a write, or
// the API's resolution of a request's resource), before any watch could
// have told them (none runs its loops here).
func TestCRDReadThrough(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	open := func() *Service {
		s, err := New(ctx, Options{Store: db, SharedStore: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b, c := open(), open(), open()
	if _, err := b.List(ctx, widgets, "default", metav1.ListOptions{}); err == nil {
		t.Fatal("widgets served before their CRD exists")
	}
	if _, ok := c.Resource(widgets); ok {
		t.Fatal("widgets resolved before their CRD exists")
	}
	if _, err := a.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server resolves a request's resource through Resource first.
	if r, ok := c.Resource(widgets); !ok || r.Kind != "Widget" {
		t.Fatalf("the API's lookup through a third Service: %+v %v", r, ok)
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"},
		"spec":     map[string]any{"name": "w", "size": "small"},
	}}
	if _, err := b.Create(ctx, widgets, w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through the other Service: %v", err)
	}
}

// countingStore counts the reads of a store.
type countingStore struct {
	store.Store
	gets, lists atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, key string, opts store.GetOptions) (*store.KeyValue, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key, opts)
}

func (c *countingStore) List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error) {
	c.lists.Add(1)
	return c.Store.List(ctx, prefix, opts)
}

// TestUnknownResourceAloneNoStoreRead: a server alone on its store has seen
// every CRD write through its own write path, so a request for a resource
// it does not serve is answered without reading the store; a server that
// shares its store reads the CRD through.
func TestUnknownResourceAloneNoStoreRead(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	unknown := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "gadgets"}
	for _, shared := range []bool{false, true} {
		cs := &countingStore{Store: db}
		s, err := New(ctx, Options{Store: cs, SharedStore: shared})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		cs.gets.Store(0)
		cs.lists.Store(0)
		if _, ok := s.Resource(unknown); ok {
			t.Fatal("an unknown resource resolved")
		}
		if _, err := s.Get(ctx, unknown, "default", "g", metav1.GetOptions{}); err == nil {
			t.Fatal("a GET of an unknown resource succeeded")
		}
		if _, err := s.List(ctx, unknown, "default", metav1.ListOptions{}); err == nil {
			t.Fatal("a LIST of an unknown resource succeeded")
		}
		reads := cs.gets.Load() + cs.lists.Load()
		if !shared && reads != 0 {
			t.Errorf("alone on its store: %d store reads for an unknown resource, want 0", reads)
		}
		if shared && reads == 0 {
			t.Error("sharing its store: no store read for an unknown resource, want the CRD read through")
		}
	}
}

// laggingCRDStore holds back each event of its CRD watches until the CRD
// is let go (release), as a replica's watch that lags behind the store,
// and calls onGet, when set, before each read of a CRD's key.
type laggingCRDStore struct {
	store.Store
	watching chan struct{} // closed when a CRD watch starts
	once     sync.Once
	onGet    atomic.Pointer[func(key string)]

	mu    sync.Mutex
	gates map[string]chan struct{} // by CRD key, closed once let go
}

func newLaggingCRDStore(st store.Store) *laggingCRDStore {
	return &laggingCRDStore{Store: st, watching: make(chan struct{}), gates: map[string]chan struct{}{}}
}

func (l *laggingCRDStore) gate(key string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.gates[key]
	if !ok {
		g = make(chan struct{})
		l.gates[key] = g
	}
	return g
}

// release lets the watches deliver the events of the CRD key.
func (l *laggingCRDStore) release(key string) {
	g := l.gate(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-g:
	default:
		close(g)
	}
}

func (l *laggingCRDStore) Get(ctx context.Context, key string, opts store.GetOptions) (*store.KeyValue, error) {
	if f := l.onGet.Load(); f != nil && strings.HasPrefix(key, crdPrefix) {
		(*f)(key)
	}
	return l.Store.Get(ctx, key, opts)
}

func (l *laggingCRDStore) Watch(ctx context.Context, prefix string, from int64) (store.Watcher, error) {
	w, err := l.Store.Watch(ctx, prefix, from)
	if err != nil || prefix != crdPrefix {
		return w, err
	}
	hw := &heldWatcher{Watcher: w, events: make(chan store.Event), stop: make(chan struct{})}
	go func() {
		defer close(hw.events)
		for ev := range w.Events() {
			select {
			case <-l.gate(ev.Object.Key):
			case <-ctx.Done():
				return
			case <-hw.stop:
				return
			}
			select {
			case hw.events <- ev:
			case <-ctx.Done():
				return
			case <-hw.stop:
				return
			}
		}
	}()
	l.once.Do(func() { close(l.watching) })
	return hw, nil
}

type heldWatcher struct {
	store.Watcher
	events   chan store.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (h *heldWatcher) Events() <-chan store.Event { return h.events }

func (h *heldWatcher) Stop() {
	h.stopOnce.Do(func() { close(h.stop) })
	h.Watcher.Stop()
}

// TestCRDReadThroughFollowerFirst: a request that misses a CRD another
// Service just created reads it through; when the Service's own CRD
// follower serves the CRD while that read is under way, the request is
// served all the same, not answered 404 because the registry has the
// revision it read already.
func TestCRDReadThroughFollowerFirst(t *testing.T) {
	a, c, ls := laggingReplicas(t)
	for _, crd := range []*unstructured.Unstructured{kindstest.WidgetCRD(t), doodadCRD.Unstructured()} {
		if _, err := a.Create(context.Background(), kinds.CRDResource, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c.reg.Get(widgets); ok {
		t.Fatal("the follower served the CRD before its watch was released")
	}
	// A request's read of a CRD lets the watch deliver its event, and
	// returns once the follower has served it.
	onGet := func(key string) {
		ls.release(key)
		name := strings.TrimPrefix(key, crdPrefix)
		deadline := time.Now().Add(10 * time.Second)
		for !c.reg.ServesCRD(name) {
			if time.Now().After(deadline) {
				t.Errorf("the follower did not serve %s within 10s", name)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	ls.onGet.Store(&onGet)
	// The API resolves a request's resource through Resource.
	if r, ok := c.Resource(widgets); !ok || r.Kind != "Widget" {
		t.Errorf("Resource(widgets) while the follower serves the CRD: %+v %v, want the Widget kind", r, ok)
	}
	// The Service's own calls look the resource up themselves.
	if c.reg.ServesCRD("doodads.test.setpoint.dev") {
		t.Fatal("the follower served the doodad CRD before its watch was let go")
	}
	_, err := c.Get(context.Background(), doodads, "", "missing", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) || strings.Contains(err.Error(), "could not find the requested resource") {
		t.Errorf("get of a missing doodad while the follower serves the CRD: %v, want the doodad not found", err)
	}
}

// laggingReplicas returns two Services sharing one Badger store: a reads it
// directly, c through ls, whose CRD watch (that of c's follower, running
// until the end of the test) delivers nothing until ls lets a CRD go.
func laggingReplicas(t *testing.T) (a, c *Service, ls *laggingCRDStore) {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	a = sharedService(t, db, time.Hour)
	ls = newLaggingCRDStore(db)
	c = sharedService(t, ls, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-ls.watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the CRD follower did not start its watch")
	}
	return a, c, ls
}

// serves reports whether rs holds gvr.
func serves(rs []kinds.Resource, gvr schema.GroupVersionResource) bool {
	for _, r := range rs {
		if r.GVR == gvr {
			return true
		}
	}
	return false
}

// TestDiscoveryCatchesUpWithCRDs: discovery (CaughtUpResources) on a Service whose
// CRD watch lags lists a CRD another Service just created, and no longer
// lists one another Service deleted, without waiting for the watch.
func TestDiscoveryCatchesUpWithCRDs(t *testing.T) {
	a, c, ls := laggingReplicas(t)
	ctx := context.Background()
	for _, crd := range []*unstructured.Unstructured{kindstest.WidgetCRD(t), doodadCRD.Unstructured()} {
		if _, err := a.Create(ctx, kinds.CRDResource, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rs := c.CaughtUpResources()
	if !serves(rs, widgets) || !serves(rs, doodads) {
		t.Fatalf("discovery just after two CRDs were created through another Service: widgets %v, doodads %v; want both",
			serves(rs, widgets), serves(rs, doodads))
	}
	deleteDoodadCRD(t, a)
	if rs := c.CaughtUpResources(); serves(rs, doodads) || !serves(rs, widgets) {
		t.Errorf("discovery just after the doodad CRD was deleted through another Service: widgets %v, doodads %v; want widgets only",
			serves(rs, widgets), serves(rs, doodads))
	}
	// The watch's late events change nothing. A third CRD, served by the
	// follower alone, tells when it has handled the events before it.
	marker := testsupport.CRD{Group: "test.setpoint.dev", Kind: "Marker", Scope: "Cluster"}
	if _, err := a.Create(ctx, kinds.CRDResource, marker.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"widgets.example.setpoint.dev", doodadCRDName, "markers.test.setpoint.dev"} {
		ls.release(crdPrefix + name)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !c.reg.ServesCRD("markers.test.setpoint.dev") {
		if time.Now().After(deadline) {
			t.Fatal("the follower did not serve the marker CRD within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	if rs := c.CaughtUpResources(); serves(rs, doodads) || !serves(rs, widgets) {
		t.Errorf("discovery after the watch caught up: widgets %v, doodads %v; want widgets only",
			serves(rs, widgets), serves(rs, doodads))
	}
}
