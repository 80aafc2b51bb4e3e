package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// namespaceReads counts the reads of namespaces from a real store.
type namespaceReads struct {
	store.Store
	n atomic.Int64
}

func (r *namespaceReads) Get(ctx context.Context, key string, opts store.GetOptions) (*store.KeyValue, error) {
	if strings.HasPrefix(key, namespacePrefix) {
		r.n.Add(1)
	}
	return r.Store.Get(ctx, key, opts)
}

// runLoops runs s's background loops until the test ends.
func runLoops(t *testing.T, s *Service) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once atomic.Bool
	stop = func() {
		if once.CompareAndSwap(false, true) {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitNamespaceCache waits, at most 10 s, until s's namespace cache answers
// active for ns or stops answering it.
func waitNamespaceCache(t *testing.T, s *Service, ns string, active bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.namespaces.active(ns, s.opts.Now()) != active {
		if time.Now().After(deadline) {
			t.Fatalf("namespace cache: %s active = %v after 10 s, want %v", ns, !active, active)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNamespaceCache: creates check their namespace from the cache the
// store's watch keeps, with the semantics of a store read: a namespace just
// created is found, a missing one is 404, a terminating one 403 with the
// NamespaceTerminating cause, whether this server or another one on the
// same store deleted it, and one created again after its deletion takes
// creates again.
func TestNamespaceCache(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	reads := &namespaceReads{Store: db}
	s, err := New(ctx, Options{Store: reads, SharedStore: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another server on the same store.
	other, err := New(ctx, Options{Store: db, SharedStore: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })

	n := 0
	create := func(ns string) error {
		n++
		w := widget("w"+string(rune('a'+n%26))+strings.Repeat("x", n/26), "small", nil)
		w.SetNamespace(ns)
		_, err := s.Create(ctx, widgets, w, metav1.CreateOptions{})
		return err
	}
	wantTerminating := func(err error, ns string) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "unable to create new content in namespace "+ns+" because it is being terminated") ||
			!apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			t.Fatalf("create in terminating namespace %s: err = %v, want 403 with cause %s", ns, err, corev1.NamespaceTerminatingCause)
		}
	}
	createNS := func(name string) {
		t.Helper()
		if _, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Before Run, and so without a watch, every create reads its namespace,
	// before it writes and again once it has (recheckNamespace).
	before := reads.n.Load()
	if err := create(kinds.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	if got := reads.n.Load() - before; got != 2 {
		t.Fatalf("create without the loops read its namespace %d times, want 2", got)
	}

	stop := runLoops(t, s)
	waitNamespaceCache(t, s, kinds.DefaultNamespace, true)
	before = reads.n.Load()
	for range 5 {
		if err := create(kinds.DefaultNamespace); err != nil {
			t.Fatal(err)
		}
	}
	if got := reads.n.Load() - before; got != 0 {
		t.Errorf("5 creates in a cached namespace read it %d times, want 0", got)
	}

	// Just created: found at once, whether or not its event has arrived.
	createNS("fresh")
	if err := create("fresh"); err != nil {
		t.Fatalf("create in a namespace just created: %v", err)
	}
	// Missing: 404 as from the store.
	if err := create("nowhere"); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `namespaces "nowhere" not found`) {
		t.Fatalf("create in a missing namespace: err = %v, want 404 namespaces \"nowhere\" not found", err)
	}

	// Deleted through this server: refused at once, with no wait for the
	// watch, and still once the watch has delivered the deletion.
	waitNamespaceCache(t, s, "fresh", true)
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "fresh", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantTerminating(create("fresh"), "fresh")
	waitNamespaceCache(t, s, "fresh", false)
	wantTerminating(create("fresh"), "fresh")

	// Deleted through another server: refused once this server's watch has
	// delivered it (the lag Kubernetes' informer has too).
	createNS("elsewhere")
	waitNamespaceCache(t, s, "elsewhere", true)
	if err := other.Delete(ctx, kinds.NamespaceResource, "", "elsewhere", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNamespaceCache(t, s, "elsewhere", false)
	wantTerminating(create("elsewhere"), "elsewhere")

	// Gone (its finalizer done, the last delete written by another server)
	// and created again: creates are taken again, at once.
	kv, err := db.Get(ctx, store.ObjectKey("", "namespaces", "", "elsewhere"), store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Delete(ctx, kv.Key, kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	if err := create("elsewhere"); !apierrors.IsNotFound(err) {
		t.Fatalf("create in a deleted namespace: err = %v, want 404", err)
	}
	createNS("elsewhere")
	if err := create("elsewhere"); err != nil {
		t.Fatalf("create in a namespace created again: %v", err)
	}
	waitNamespaceCache(t, s, "elsewhere", true)

	// Once the loops stop, the cache answers nothing and creates read the
	// store again.
	stop()
	if s.namespaces.active(kinds.DefaultNamespace, s.opts.Now()) {
		t.Error("namespace cache answers after Run returned")
	}
	before = reads.n.Load()
	if err := create(kinds.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	if got := reads.n.Load() - before; got != 2 {
		t.Errorf("create after Run returned read its namespace %d times, want 2", got)
	}
}

// TestNamespaceCacheOrder: the cache keeps the newest state of a namespace
// whatever order its own writes and the watch's events reach it in, and a
// namespace whose deletion this server admitted is read from the store for
// namespaceLiveLookup whatever the cache says.
func TestNamespaceCacheOrder(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	doc := func(deleting bool) []byte {
		if deleting {
			return []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z","name":"a"}}`)
		}
		return []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`)
	}
	put := func(rev int64, deleting bool) store.Event {
		return store.Event{Type: store.Modified, Object: store.KeyValue{Key: namespacePrefix + "a", Value: doc(deleting), ModRevision: rev}}
	}
	del := func(rev int64) store.Event {
		return store.Event{Type: store.Deleted, Object: store.KeyValue{Key: namespacePrefix + "a", Value: doc(true), ModRevision: rev}}
	}
	type step struct {
		name   string
		do     func(c *namespaceCache)
		at     time.Duration
		active bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "unsynced answers nothing", steps: []step{
			{name: "event", do: func(c *namespaceCache) { c.apply(put(5, false)) }},
		}},
		{name: "listed active", steps: []step{
			{name: "reset", do: func(c *namespaceCache) { c.reset(map[string]namespaceEntry{"a": {rev: 5, active: true}}, 5) }, active: true},
			{name: "terminating event", do: func(c *namespaceCache) { c.apply(put(6, true)) }},
			{name: "deleted event", do: func(c *namespaceCache) { c.apply(del(7)) }},
			{name: "created again", do: func(c *namespaceCache) { c.apply(put(8, false)) }, active: true},
			{name: "unsync", do: func(c *namespaceCache) { c.unsync() }},
		}},
		{name: "own write before older events", steps: []step{
			{name: "reset", do: func(c *namespaceCache) { c.reset(map[string]namespaceEntry{"a": {rev: 5, active: true}}, 5) }, active: true},
			{name: "marked at 9", do: func(c *namespaceCache) { c.markInactive("a", 9) }},
			{name: "older active event", do: func(c *namespaceCache) { c.apply(put(8, false)) }},
			{name: "older deleted event", do: func(c *namespaceCache) { c.apply(del(8)) }},
			{name: "older active event after it", do: func(c *namespaceCache) { c.apply(put(7, false)) }},
			{name: "newer active event", do: func(c *namespaceCache) { c.apply(put(10, false)) }, active: true},
		}},
		{name: "own write kept over an older list", steps: []step{
			{name: "marked at 9", do: func(c *namespaceCache) { c.markInactive("a", 9) }},
			{name: "reset at 8", do: func(c *namespaceCache) { c.reset(map[string]namespaceEntry{"a": {rev: 4, active: true}}, 8) }},
			{name: "reset at 9", do: func(c *namespaceCache) { c.reset(map[string]namespaceEntry{"a": {rev: 9, active: true}}, 9) }, active: true},
		}},
		{name: "own delete after the watch delivered it", steps: []step{
			{name: "reset", do: func(c *namespaceCache) { c.reset(map[string]namespaceEntry{"a": {rev: 5, active: true}}, 5) }, active: true},
			{name: "deleted event", do: func(c *namespaceCache) { c.apply(del(7)) }},
			{name: "marked at the revision before the delete", do: func(c *namespaceCache) { c.markInactive("a", 5) }},
			{name: "created again", do: func(c *namespaceCache) { c.apply(put(8, false)) }, active: true},
		}},
		{name: "live lookup after an admitted deletion", steps: []step{
			{name: "reset", do: func(c *namespaceCache) { c.reset(map[string]namespaceEntry{"a": {rev: 5, active: true}}, 5) }, active: true},
			{name: "deletion admitted", do: func(c *namespaceCache) { c.lookLive("a", now) }},
			{name: "just before the end", at: namespaceLiveLookup - time.Nanosecond},
			{name: "at the end", at: namespaceLiveLookup, active: true},
			{name: "after", at: namespaceLiveLookup + time.Second, active: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c namespaceCache
			for _, st := range tt.steps {
				if st.do != nil {
					st.do(&c)
				}
				if got := c.active("a", now.Add(st.at)); got != st.active {
					t.Errorf("after %s: active = %v, want %v", st.name, got, st.active)
				}
				if c.active("b", now.Add(st.at)) {
					t.Errorf("after %s: b, never seen, is active", st.name)
				}
			}
		})
	}

	// A deletion's Deleted event, then this server's mark at the revision
	// before it (the order a fast watch gives): no entry is left.
	var c namespaceCache
	c.reset(map[string]namespaceEntry{"a": {rev: 5, active: true}}, 5)
	c.apply(del(7))
	c.markInactive("a", 5)
	if entries, _ := c.size(); entries != 0 {
		t.Errorf("after a deletion seen by the watch and marked after it: %d entries, want 0", entries)
	}
}

// TestNamespaceCacheChurn creates and deletes namespaces through the
// engine, each deletion finished as the collector finishes it (its
// finalizer removed through /finalize, which deletes it): once the watch has delivered the
// deletions and their live lookups are over, the cache holds what it held
// before, however the hooks and the watch interleaved.
func TestNamespaceCacheChurn(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	s, err := New(ctx, Options{Store: db, Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	runLoops(t, s)
	waitNamespaceCache(t, s, kinds.DefaultNamespace, true)
	baseEntries, baseLive := s.namespaces.size()

	const n = 60
	for round := range 3 {
		for i := range n {
			name := fmt.Sprintf("churn-%d", i)
			if _, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj(name, nil), metav1.CreateOptions{}); err != nil {
				t.Fatalf("round %d: create %s: %v", round, name, err)
			}
			if err := s.Delete(ctx, kinds.NamespaceResource, "", name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("round %d: delete %s: %v", round, name, err)
			}
			cur, err := s.Get(ctx, kinds.NamespaceResource, "", name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("round %d: get %s: %v", round, name, err)
			}
			unstructured.RemoveNestedField(cur.Object, "spec", "finalizers")
			if _, err := s.UpdateFinalize(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("round %d: remove the finalizer of %s: %v", round, name, err)
			}
			if _, err := s.Get(ctx, kinds.NamespaceResource, "", name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("round %d: %s after its finalizer was removed: err = %v, want 404", round, name, err)
			}
		}
		// The watch delivers the deletions; entries must return to the
		// baseline (a mark left after a delivered deletion never goes).
		deadline := time.Now().Add(10 * time.Second)
		for {
			entries, _ := s.namespaces.size()
			if entries == baseEntries {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the cache holds %d namespaces 10 s after %d were deleted, want %d", round, entries, n, baseEntries)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The live lookups of the deletions end namespaceLiveLookup later;
	// the next deletion drops them.
	if _, live := s.namespaces.size(); live != n {
		t.Fatalf("live lookups after deleting %d namespaces: %d, want %d", n, live, n)
	}
	clock.Add(int64(namespaceLiveLookup))
	if _, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj("last", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "last", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, live := s.namespaces.size(); live != baseLive+1 {
		t.Fatalf("live lookups once those of the earlier deletions were over: %d, want %d", live, baseLive+1)
	}
}
