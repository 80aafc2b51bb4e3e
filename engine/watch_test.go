package engine

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestWatchDeliver checks the sink mode of a watch: after Deliver, the
// initial events and then the changes reach the sink, in order, and nothing
// reaches the result channel; a sink that returns false ends the watch,
// which calls end once, closes the result channel and calls the sink no
// more.
func TestWatchDeliver(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	mustCreate(t, s, widget("a", "small", nil))
	w, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := make(chan watch.Event, 16)
	calls, ends := 0, 0
	ended := make(chan struct{})
	w.(*objectWatch).Deliver(func(ev watch.Event) bool {
		calls++
		got <- ev
		return calls < 3 // the third event is the last one taken
	}, func() {
		ends++
		close(ended)
	})
	next := func() watch.Event {
		t.Helper()
		select {
		case ev := <-got:
			return ev
		case ev, ok := <-w.ResultChan():
			if !ok && len(got) > 0 {
				return <-got // the sink's last event came before the end
			}
			t.Fatalf("result channel gave %v (open %v) in sink mode", ev, ok)
		case <-time.After(5 * time.Second):
			t.Fatal("no event in 5s")
		}
		return watch.Event{}
	}
	name := func(ev watch.Event) string { return ev.Object.(*unstructured.Unstructured).GetName() }
	if ev := next(); ev.Type != watch.Added || name(ev) != "a" {
		t.Fatalf("initial event %s %s, want ADDED a", ev.Type, name(ev))
	}
	mustCreate(t, s, widget("b", "small", nil))
	if ev := next(); ev.Type != watch.Added || name(ev) != "b" {
		t.Fatalf("event %s %s, want ADDED b", ev.Type, name(ev))
	}
	if _, err := s.Patch(ctx, widgets, "default", "a", types.MergePatchType, []byte(`{"spec":{"size":"large"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Type != watch.Modified || name(ev) != "a" {
		t.Fatalf("event %s %s, want MODIFIED a", ev.Type, name(ev))
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end when the sink returned false")
	}
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("result channel gave an event in sink mode")
	}
	mustCreate(t, s, widget("c", "small", nil))
	w.Stop()
	if calls != 3 || ends != 1 {
		t.Fatalf("sink called %d times and end %d, want 3 and 1", calls, ends)
	}
}

// TestWatchDeliverAfterEnd checks that Deliver does not wait for a watch
// that has already ended, and calls end itself.
func TestWatchDeliverAfterEnd(t *testing.T) {
	s := newService(t)
	w, err := s.Watch(context.Background(), widgets, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	done := make(chan struct{})
	ends := 0
	go func() {
		w.(*objectWatch).Deliver(func(watch.Event) bool { return true }, func() { ends++ })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Deliver blocked on a stopped watch")
	}
	if ends != 1 {
		t.Fatalf("end called %d times, want 1", ends)
	}
}

// TestWatchDeliverFlushed checks DeliverFlushed's flush: called after the
// initial events and after each later event with no other waiting, before
// the watch waits again, and not when nothing was sent since the last one;
// a flush that returns false ends the watch.
func TestWatchDeliverFlushed(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	mustCreate(t, s, widget("a", "small", nil))
	mustCreate(t, s, widget("b", "small", nil))
	w, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// The sink's calls, in order: an event's name or "flush".
	calls := make(chan string, 16)
	flushes := 0
	ended := make(chan struct{})
	w.(*objectWatch).DeliverFlushed(func(ev watch.Event) bool {
		calls <- ev.Object.(*unstructured.Unstructured).GetName()
		return true
	}, func() bool {
		flushes++
		calls <- "flush"
		return flushes < 2 // the second flush ends the watch
	}, func() { close(ended) })
	next := func() string {
		t.Helper()
		select {
		case c := <-calls:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("no call in 5s")
		}
		return ""
	}
	for _, want := range []string{"a", "b", "flush"} {
		if got := next(); got != want {
			t.Fatalf("call %q, want %q", got, want)
		}
	}
	mustCreate(t, s, widget("c", "small", nil))
	for _, want := range []string{"c", "flush"} {
		if got := next(); got != want {
			t.Fatalf("call %q, want %q", got, want)
		}
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end when flush returned false")
	}
	if len(calls) != 0 || flushes != 2 {
		t.Fatalf("%d more calls and %d flushes, want none and 2", len(calls), flushes)
	}
}

// stopCountingStore counts the Stop calls on the store watches of Widgets.
type stopCountingStore struct {
	*badger.DB
	started, stopped atomic.Int32
}

func (s *stopCountingStore) Watch(ctx context.Context, prefix string, from int64) (store.Watcher, error) {
	w, err := s.DB.Watch(ctx, prefix, from)
	if err != nil || !strings.Contains(prefix, "widgets") {
		return w, err
	}
	s.started.Add(1)
	return &stopCountingWatcher{Watcher: w, stopped: &s.stopped}, nil
}

type stopCountingWatcher struct {
	store.Watcher
	stopped *atomic.Int32
	once    sync.Once
}

func (w *stopCountingWatcher) Stop() {
	w.once.Do(func() { w.stopped.Add(1) })
	w.Watcher.Stop()
}

// TestWatchStopsItsStoreWatch checks that a watch stops its store watch
// when it ends, on Stop or when its context ends: the store watch is not
// tied to that context itself.
func TestWatchStopsItsStoreWatch(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &stopCountingStore{DB: db}
	s, err := New(context.Background(), Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Create(context.Background(), kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		end  func(w watch.Interface, cancel context.CancelFunc)
	}{
		{name: "Stop", end: func(w watch.Interface, _ context.CancelFunc) { w.Stop() }},
		{name: "context done", end: func(_ watch.Interface, cancel context.CancelFunc) { cancel() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			before := st.stopped.Load()
			var w watch.Interface
			testsupport.Eventually(t, 10*time.Second, "Widgets to be served", func() bool {
				w, err = s.Watch(ctx, widgets, "default", metav1.ListOptions{})
				return err == nil
			})
			defer w.Stop()
			tc.end(w, cancel)
			for range w.ResultChan() {
			}
			if got := st.stopped.Load() - before; got != 1 {
				t.Errorf("store watches stopped: %d, want 1", got)
			}
		})
	}
	if st.started.Load() != st.stopped.Load() {
		t.Errorf("store watches started %d, stopped %d", st.started.Load(), st.stopped.Load())
	}
}
