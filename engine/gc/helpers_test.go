package gc

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// gcTestStore is a real store that counts Lists and can hold the
// collector's watch of the whole keyspace: cut ends it as a watcher that fell
// behind, and new ones wait until release.
type gcTestStore struct {
	store.Store
	lists atomic.Int64

	mu   sync.Mutex
	cut  chan struct{} // closed to end the current keyspace watches
	gate chan struct{} // when not nil, new keyspace watches wait for it to close
}

func (st *gcTestStore) List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error) {
	st.lists.Add(1)
	return st.Store.List(ctx, prefix, opts)
}

func (st *gcTestStore) Watch(ctx context.Context, prefix string, from int64) (store.Watcher, error) {
	if prefix != "/" {
		return st.Store.Watch(ctx, prefix, from)
	}
	st.mu.Lock()
	gate := st.gate
	if st.cut == nil {
		st.cut = make(chan struct{})
	}
	cut := st.cut
	st.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	w, err := st.Store.Watch(ctx, prefix, from)
	if err != nil {
		return nil, err
	}
	cw := &cutWatcher{inner: w, out: make(chan store.Event), stopped: make(chan struct{})}
	go cw.relay(cut)
	return cw, nil
}

// cutWatches ends the current keyspace watches and holds new ones until the
// returned function is called.
func (st *gcTestStore) cutWatches() (release func()) {
	st.mu.Lock()
	defer st.mu.Unlock()
	gate := make(chan struct{})
	st.gate = gate
	if st.cut != nil {
		close(st.cut)
	}
	st.cut = make(chan struct{})
	return func() {
		st.mu.Lock()
		st.gate = nil
		st.mu.Unlock()
		close(gate)
	}
}

type cutWatcher struct {
	inner   store.Watcher
	out     chan store.Event
	stopped chan struct{}
	once    sync.Once
	err     error // set before out is closed
}

func (w *cutWatcher) relay(cut <-chan struct{}) {
	defer close(w.out)
	defer w.inner.Stop()
	for {
		select {
		case ev, ok := <-w.inner.Events():
			if !ok {
				w.err = w.inner.Err()
				return
			}
			select {
			case w.out <- ev:
			case <-cut:
				w.err = store.ErrWatcherTooSlow
				return
			case <-w.stopped:
				return
			}
		case <-cut:
			w.err = store.ErrWatcherTooSlow
			return
		case <-w.stopped:
			return
		}
	}
}

func (w *cutWatcher) Events() <-chan store.Event { return w.out }

func (w *cutWatcher) Progress() (int64, bool) { return 0, false }
func (w *cutWatcher) Err() error              { return w.err }
func (w *cutWatcher) Stop()                   { w.once.Do(func() { close(w.stopped) }) }

// newGCService opens a Service on a counting store over a real Badger, with
// the Widget CRD, and its Collector; with run set, it runs both until the
// test ends.
func newGCService(t testing.TB, run bool) (*engine.Service, *Collector, *gcTestStore) {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &gcTestStore{Store: db}
	s, err := engine.New(context.Background(), engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Create(context.Background(), kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := newCollector(t, s, st)
	if run {
		runService(t, s, c)
	}
	return s, c, st
}

// newCollector returns the collector of s, on st, sweeping only when a test
// asks.
func newCollector(t testing.TB, s *engine.Service, st store.Store) *Collector {
	t.Helper()
	c, err := New(s, Options{Store: st, SweepInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runService runs s and its collector c until the test ends, and then
// closes s.
func runService(t testing.TB, s *engine.Service, c *Collector) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(ctx) })
	wg.Go(func() { _ = c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait(); s.Close() })
}

// gcSynced waits until the collector's graph reflects the store's current
// revision.
func gcSynced(t testing.TB, c *Collector) {
	t.Helper()
	cur, err := c.st.CurrentRevision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "the graph to catch up", func() bool { return c.rev.Load() >= cur })
}

// settle runs garbage collection sweeps until one changes nothing.
func settle(t *testing.T, c *Collector) {
	t.Helper()
	for range 50 {
		changed, err := c.sweep(context.Background())
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		if !changed {
			return
		}
	}
	t.Fatal("sweeps did not settle")
}

var widgets = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}

func widget(name, size string, labels map[string]string) *unstructured.Unstructured {
	return kindstest.Widget(name, size, labels)
}

func namespaceObj(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	u.SetName(name)
	return u
}

func mustCreate(t *testing.T, s *engine.Service, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := s.Create(context.Background(), widgets, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
	return out
}

func ownedWidget(name string, block bool, owners ...*unstructured.Unstructured) *unstructured.Unstructured {
	u := widget(name, "small", nil)
	var refs []metav1.OwnerReference
	for _, o := range owners {
		refs = append(refs, metav1.OwnerReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(), BlockOwnerDeletion: &block})
	}
	u.SetOwnerReferences(refs)
	return u
}

func widgetGone(s *engine.Service, name string) func() bool {
	return func() bool {
		_, err := s.Get(context.Background(), widgets, "default", name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

// processCPU is the CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
