package engine

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
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
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
// the Widget CRD, and runs it until the test ends.
func newGCService(t *testing.T, run bool) (*Service, *gcTestStore) {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &gcTestStore{Store: db}
	s, err := New(context.Background(), Options{Store: st, GCInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(context.Background(), kinds.CRDResource, readYAML(t, "../examples/widget/crd.yaml"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if run {
		runService(t, s)
	}
	return s, st
}

func runService(t *testing.T, s *Service) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// eventually waits up to 10 seconds for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gcSynced waits until the collector's graph reflects the store's current
// revision.
func gcSynced(t *testing.T, s *Service) {
	t.Helper()
	cur, err := s.store.CurrentRevision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the graph to catch up", func() bool { return s.gc.rev.Load() >= cur })
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

func widgetGone(s *Service, name string) func() bool {
	return func() bool {
		_, err := s.Get(context.Background(), widgets, "default", name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

// A background delete collects the owner's dependents without listing
// anything: its work does not depend on the other objects in the store.
func TestGCDeleteListsNothing(t *testing.T) {
	ctx := context.Background()
	s, st := newGCService(t, true)
	for i := range 200 {
		mustCreate(t, s, widget(fmt.Sprintf("other-%d", i), "small", nil))
	}
	owner := mustCreate(t, s, widget("owner", "small", nil))
	for i := range 5 {
		mustCreate(t, s, ownedWidget(fmt.Sprintf("dep-%d", i), false, owner))
	}
	gcSynced(t, s)
	before := st.lists.Load()
	if err := s.Delete(ctx, widgets, "default", "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		eventually(t, "dependent collected", widgetGone(s, fmt.Sprintf("dep-%d", i)))
	}
	if n := st.lists.Load() - before; n != 0 {
		t.Errorf("collecting 5 dependents made %d store Lists, want 0", n)
	}
	l, err := s.List(ctx, widgets, "default", metav1.ListOptions{})
	if err != nil || len(l.Items) != 200 {
		t.Fatalf("widgets left = %d, %v; want the 200 unrelated ones", len(l.Items), err)
	}
}

// A owns B owns C: deleting A collects B, whose delete collects C.
func TestGCChainCascades(t *testing.T) {
	ctx := context.Background()
	s, _ := newGCService(t, true)
	a := mustCreate(t, s, widget("a", "small", nil))
	b := mustCreate(t, s, ownedWidget("b", false, a))
	mustCreate(t, s, ownedWidget("c", false, b))
	keep := mustCreate(t, s, widget("keep", "small", nil))
	mustCreate(t, s, ownedWidget("d", false, b, keep)) // another owner remains
	if err := s.Delete(ctx, widgets, "default", "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b collected", widgetGone(s, "b"))
	eventually(t, "c collected", widgetGone(s, "c"))
	eventually(t, "d's reference to b dropped", func() bool {
		d, err := s.Get(ctx, widgets, "default", "d", metav1.GetOptions{})
		return err == nil && len(d.GetOwnerReferences()) == 1 && d.GetOwnerReferences()[0].UID == keep.GetUID()
	})
}

// Foreground deletion of a chain: the owner waits until its blocking
// dependents, and theirs, are gone.
func TestGCForegroundChain(t *testing.T) {
	ctx := context.Background()
	s, _ := newGCService(t, true)
	a := mustCreate(t, s, widget("fa", "small", nil))
	b := mustCreate(t, s, ownedWidget("fb", true, a))
	c := ownedWidget("fc", true, b)
	c.SetFinalizers([]string{"example.setpoint.dev/hold"})
	mustCreate(t, s, c)
	fg := metav1.DeletePropagationForeground
	if err := s.Delete(ctx, widgets, "default", "fa", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "fc terminating", func() bool {
		x, err := s.Get(ctx, widgets, "default", "fc", metav1.GetOptions{})
		return err == nil && x.GetDeletionTimestamp() != nil
	})
	for _, n := range []string{"fa", "fb"} {
		if widgetGone(s, n)() {
			t.Fatalf("%s went before its blocking dependent", n)
		}
	}
	if _, err := s.Patch(ctx, widgets, "default", "fc", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "fb deleted", widgetGone(s, "fb"))
	eventually(t, "fa deleted", widgetGone(s, "fa"))
}

// The watch expires (the collector fell behind and its revision was
// compacted meanwhile): the collector lists again and collects what it
// missed.
func TestGCRelistsAfterWatchExpiry(t *testing.T) {
	ctx := context.Background()
	s, st := newGCService(t, true)
	owner := mustCreate(t, s, widget("owner", "small", nil))
	mustCreate(t, s, ownedWidget("dep", false, owner))
	gcSynced(t, s)
	if n := s.gc.relists.Load(); n != 1 {
		t.Fatalf("relists = %d before the cut, want 1", n)
	}
	release := st.cutWatches()
	if err := s.Delete(ctx, widgets, "default", "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := st.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if widgetGone(s, "dep")() {
		t.Fatal("dep collected while the collector's watch was held")
	}
	release()
	eventually(t, "dep collected after the relist", widgetGone(s, "dep"))
	if n := s.gc.relists.Load(); n != 2 {
		t.Errorf("relists = %d, want 2", n)
	}
}

// An owner the graph does not know yet (created while the graph catches up)
// is looked up in the store: its dependent is kept. Once the owner is gone
// from the store, the dependent is collected.
func TestGCUnknownOwnerIsLookedUp(t *testing.T) {
	ctx := context.Background()
	s, _ := newGCService(t, false) // no collector running: the graph is built by hand
	owner := mustCreate(t, s, widget("new-owner", "small", nil))
	dep := mustCreate(t, s, ownedWidget("new-dep", false, owner))
	c := s.gc
	c.mu.Lock()
	m := gcMeta{UID: dep.GetUID(), Name: dep.GetName(), Namespace: "default", OwnerReferences: dep.GetOwnerReferences()}
	c.g.put(c.g.node(widgets.GroupResource(), &m))
	c.g.put(c.g.node(kinds.NamespaceResource.GroupResource(), &gcMeta{UID: "ns-uid", Name: "default"}))
	c.mu.Unlock()
	if err := c.attempt(ctx, dep.GetUID()); err != nil {
		t.Fatal(err)
	}
	if widgetGone(s, "new-dep")() {
		t.Fatal("a dependent of an owner missing from the graph but present in the store was collected")
	}
	if err := s.Delete(ctx, widgets, "default", "new-owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.attempt(ctx, dep.GetUID()); err != nil {
		t.Fatal(err)
	}
	if !widgetGone(s, "new-dep")() {
		t.Fatal("the dependent of a deleted owner was kept")
	}
}

// A deleted namespace stays Terminating until its content is gone, and goes
// then, without a sweep.
func TestGCNamespaceEmptied(t *testing.T) {
	ctx := context.Background()
	s, _ := newGCService(t, true)
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "gcns"}}}
	if _, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		w := widget(fmt.Sprintf("w%d", i), "small", nil)
		w.SetNamespace("gcns")
		if i == 0 {
			w.SetFinalizers([]string{"example.setpoint.dev/hold"})
		}
		if _, err := s.Create(ctx, widgets, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "gcns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "w1 and w2 deleted, w0 terminating", func() bool {
		l, err := s.List(ctx, widgets, "gcns", metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && l.Items[0].GetDeletionTimestamp() != nil
	})
	if n, err := s.Get(ctx, kinds.NamespaceResource, "", "gcns", metav1.GetOptions{}); err != nil || n.GetDeletionTimestamp() == nil {
		t.Fatalf("namespace with content left = %v, %v; want it Terminating", n, err)
	}
	if _, err := s.Patch(ctx, widgets, "gcns", "w0", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace gone", func() bool {
		_, err := s.Get(ctx, kinds.NamespaceResource, "", "gcns", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// Deleting a CRD deletes its objects and then the CRD, without a sweep.
func TestGCCRDCleanup(t *testing.T) {
	ctx := context.Background()
	s, _ := newGCService(t, true)
	for i := range 5 {
		mustCreate(t, s, widget(fmt.Sprintf("c%d", i), "small", nil))
	}
	if err := s.Delete(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CRD gone", func() bool {
		_, err := s.Get(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	res, err := s.store.List(ctx, store.ResourcePrefix(widgets.Group, widgets.Resource, ""), store.ListOptions{})
	if err != nil || len(res.Items) != 0 {
		t.Fatalf("widgets left in the store: %d, %v", len(res.Items), err)
	}
}

// Two servers on one store, each running its collector, race on the same
// cascades; both settle with everything collected.
func TestGCTwoServers(t *testing.T) {
	ctx := context.Background()
	s, st := newGCService(t, true)
	other, err := New(ctx, Options{Store: st, GCInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	runService(t, other)
	var owners []*unstructured.Unstructured
	for i := range 10 {
		o := mustCreate(t, s, widget(fmt.Sprintf("o%d", i), "small", nil))
		owners = append(owners, o)
		for j := range 3 {
			mustCreate(t, other, ownedWidget(fmt.Sprintf("o%d-d%d", i, j), false, o))
		}
	}
	for i, o := range owners {
		srv := s
		if i%2 == 1 {
			srv = other
		}
		if err := srv.Delete(ctx, widgets, "default", o.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every dependent collected", func() bool {
		l, err := s.List(ctx, widgets, "default", metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, it := range l.Items {
			if strings.HasPrefix(it.GetName(), "o") {
				return false
			}
		}
		return true
	})
}

// A Service run again after its first Run ended collects as before: the
// graph is listed again and the queue is new.
func TestGCRunAgain(t *testing.T) {
	ctx := context.Background()
	s, _ := newGCService(t, false)
	first, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(first) }()
	gcSynced(t, s)
	cancel()
	<-done
	runService(t, s)
	owner := mustCreate(t, s, widget("again-owner", "small", nil))
	mustCreate(t, s, ownedWidget("again-dep", false, owner))
	gcSynced(t, s)
	if err := s.Delete(ctx, widgets, "default", "again-owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "again-dep collected", widgetGone(s, "again-dep"))
	if n := s.gc.relists.Load(); n != 2 {
		t.Errorf("relists = %d, want 2", n)
	}
}
