package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/store"
)

// history writes a fixed mix of creates, updates and deletes on a few keys and
// returns the events a watcher must see for them, in revision order.
func history(t *testing.T, ctx context.Context, st store.Store, n int) []store.Event {
	t.Helper()
	cur := map[string]*store.KeyValue{}
	var out []store.Event
	for i := range n {
		k := key(i % 4)
		v := doc(fmt.Sprintf("%d", i))
		old := cur[k]
		switch {
		case old == nil:
			rev := mustCreate(t, ctx, st, k, v)
			kv := &store.KeyValue{Key: k, Value: v, CreateRevision: rev, ModRevision: rev}
			cur[k] = kv
			out = append(out, store.Event{Type: store.Added, Object: *kv})
		case i%5 == 4:
			rev := mustDelete(t, ctx, st, k, old.ModRevision)
			obj := *old
			obj.ModRevision = rev
			out = append(out, store.Event{Type: store.Deleted, Object: obj, Prev: old})
			delete(cur, k)
		default:
			rev := mustUpdate(t, ctx, st, k, v, old.ModRevision)
			kv := &store.KeyValue{Key: k, Value: v, CreateRevision: old.CreateRevision, ModRevision: rev}
			cur[k] = kv
			out = append(out, store.Event{Type: store.Modified, Object: *kv, Prev: old})
		}
	}
	return out
}

func (s suite) testWatchPrevObjects(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	w, err := st.Watch(ctx, widgets, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	want := history(t, ctx, st, 12)
	got := collect(t, ctx, w, want[len(want)-1].Revision())
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}

func (s suite) testWatchPrefix(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	other := store.ObjectKey("example.setpoint.dev", "widgets", "defaults", "x")
	w, err := st.Watch(ctx, widgets, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	mustCreate(t, ctx, st, other, doc("no"))
	r := mustCreate(t, ctx, st, key(1), doc("yes"))
	mustUpdate(t, ctx, st, other, doc("no"), 0)
	r2 := mustUpdate(t, ctx, st, key(1), doc("yes2"), 0)
	got := collect(t, ctx, w, r2)
	if len(got) != 2 || got[0].Revision() != r || got[1].Revision() != r2 {
		t.Errorf("events %+v, want revisions %d and %d only", got, r, r2)
	}
}

func (s suite) testWatchFromZero(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	mustCreate(t, ctx, st, key(1), doc("old"))
	w, err := st.Watch(ctx, widgets, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	r := mustCreate(t, ctx, st, key(2), doc("new"))
	got := collect(t, ctx, w, r)
	if len(got) != 1 || got[0].Object.Key != key(2) {
		t.Errorf("events %+v, want only the create of %s", got, key(2))
	}
}

// testWatchOrderingConcurrent has writers race while watchers, one started
// before the writes and one in the middle of them, must see every revision
// exactly once, in order, with the content each writer was acknowledged for.
func (s suite) testWatchOrderingConcurrent(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	const writers, perWriter = 8, 40
	start := mustRev(t, ctx, st)
	end := start + writers*perWriter
	type result struct {
		name string
		from int64
		w    store.Watcher
		evs  []store.Event
	}
	results := make(chan result, 2)
	// Watchers are read while the writes go on, as a consumer would.
	follow := func(name string, from int64) error {
		w, err := st.Watch(ctx, widgets, from)
		if err != nil {
			return err
		}
		go func() { results <- result{name, from, w, collectQuiet(ctx, w, end)} }()
		return nil
	}
	if err := follow("early watcher", start); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[int64]string{} // revision -> key@value
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			k := key(w)
			var rev int64
			for i := range perWriter {
				v := fmt.Sprintf("%d-%d", w, i)
				var err error
				if i == 0 {
					rev, err = st.Create(ctx, k, doc(v))
				} else {
					rev, err = st.Update(ctx, k, doc(v), rev)
				}
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				acked[rev] = k + "@" + string(doc(v))
				mu.Unlock()
				if w == 0 && i == perWriter/2 {
					if err := follow("mid watcher", rev); err != nil {
						errc <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for range 2 {
		r := <-results
		r.w.Stop()
		if want := int(end - r.from); len(r.evs) != want {
			t.Fatalf("%s from %d: %d events, want %d; ended with %v", r.name, r.from, len(r.evs), want, r.w.Err())
		}
		for i, ev := range r.evs {
			if want := r.from + 1 + int64(i); ev.Revision() != want {
				t.Fatalf("%s: event %d at revision %d, want %d", r.name, i, ev.Revision(), want)
			}
			if got := ev.Object.Key + "@" + string(ev.Object.Value); got != acked[ev.Revision()] {
				t.Errorf("%s: revision %d is %s, acknowledged %s", r.name, ev.Revision(), got, acked[ev.Revision()])
			}
			if ev.Type == store.Modified && (ev.Prev == nil || ev.Prev.ModRevision >= ev.Revision()) {
				t.Errorf("%s: revision %d has Prev %+v", r.name, ev.Revision(), ev.Prev)
			}
		}
	}
}

// testWatchResumeEveryRevision starts a watch from every revision of a
// history and checks each sees exactly the rest of it.
func (s suite) testWatchResumeEveryRevision(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	mustCreate(t, ctx, st, store.ObjectKey("g", "other", "", "x"), doc("x"))
	start := mustRev(t, ctx, st)
	want := history(t, ctx, st, 40)
	end := want[len(want)-1].Revision()
	for from := start; from < end; from++ {
		w, err := st.Watch(ctx, widgets, from)
		if err != nil {
			t.Fatalf("Watch from %d: %v", from, err)
		}
		got := collect(t, ctx, w, end)
		w.Stop()
		if d := cmp.Diff(want[from-start:], got); d != "" {
			t.Fatalf("watch from %d (-want +got):\n%s", from, d)
		}
	}
	// From the last revision: nothing until the next write.
	w, err := st.Watch(ctx, widgets, end)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	r := mustCreate(t, ctx, st, key(50), doc("next"))
	if got := collect(t, ctx, w, r); len(got) != 1 || got[0].Revision() != r {
		t.Errorf("watch from the last revision: %+v", got)
	}
}

func (s suite) testWatchStop(t *testing.T) {
	t.Run("Stop", func(t *testing.T) {
		ctx := testCtx(t)
		st := s.open(t)
		w, err := st.Watch(ctx, widgets, 0)
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		w.Stop()
		for range w.Events() {
		}
		if err := w.Err(); err != nil {
			t.Errorf("Err after Stop: %v", err)
		}
	})
	t.Run("context", func(t *testing.T) {
		ctx := testCtx(t)
		st := s.open(t)
		mustCreate(t, ctx, st, key(1), doc("a"))
		wctx, cancel := context.WithCancel(ctx)
		w, err := st.Watch(wctx, widgets, 0)
		if err != nil {
			t.Fatal(err)
		}
		r := mustUpdate(t, ctx, st, key(1), doc("b"), 0)
		collect(t, ctx, w, r)
		cancel()
		for range w.Events() {
		}
		if err := w.Err(); err != nil {
			t.Errorf("Err after cancel: %v", err)
		}
		// Writes go on.
		mustUpdate(t, ctx, st, key(1), doc("c"), 0)
	})
	t.Run("cancelled before catch-up", func(t *testing.T) {
		ctx := testCtx(t)
		st := s.open(t)
		history(t, ctx, st, 20)
		wctx, cancel := context.WithCancel(ctx)
		w, err := st.Watch(wctx, widgets, 1)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		for range w.Events() {
		}
		if err := w.Err(); err != nil {
			t.Errorf("Err after cancel: %v", err)
		}
	})
}

func (s suite) testSlowWatcher(t *testing.T) {
	ctx := testCtx(t)
	st := closeAtEnd(t, s.caps.NewSlowWatchStore(t))
	mustCreate(t, ctx, st, key(1), doc("0"))
	from := mustRev(t, ctx, st)
	slow, err := st.Watch(ctx, widgets, from)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Stop()
	fast, err := st.Watch(ctx, widgets, from)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Stop()
	n := 4*s.caps.SlowWatchBuffer + 10
	// Writes never wait for the slow watcher, which nobody reads (the test
	// deadline catches a block). The fast one is read after every write, so
	// it never holds more than one event and must not be cut off.
	for i := range n {
		rev := mustUpdate(t, ctx, st, key(1), doc(fmt.Sprint(i+1)), 0)
		if got := collect(t, ctx, fast, rev); len(got) != 1 {
			t.Fatalf("fast watcher: %d events for one write", len(got))
		}
	}
	var got []store.Event
	for ev := range slow.Events() {
		got = append(got, ev)
	}
	if err := slow.Err(); err != store.ErrWatcherTooSlow {
		t.Fatalf("slow watcher Err %v, want ErrWatcherTooSlow", err)
	}
	if len(got) >= n {
		t.Fatalf("slow watcher received all %d events", len(got))
	}
	last := from
	for _, ev := range got {
		if ev.Revision() != last+1 {
			t.Fatalf("slow watcher: revision %d after %d", ev.Revision(), last)
		}
		last = ev.Revision()
	}
	// Resuming from the last event received loses nothing.
	w, err := st.Watch(ctx, widgets, last)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rest := collect(t, ctx, w, from+int64(n))
	if len(rest) != int(from+int64(n)-last) || rest[0].Revision() != last+1 {
		t.Errorf("resumed watch: %d events from %d, want %d from %d", len(rest), rest[0].Revision(), from+int64(n)-last, last+1)
	}
}

// collectQuiet is collect for goroutines: it returns what it got on an error.
func collectQuiet(ctx context.Context, w store.Watcher, upto int64) []store.Event {
	var out []store.Event
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return out
			}
			out = append(out, ev)
			if ev.Revision() >= upto {
				return out
			}
		case <-ctx.Done():
			return out
		}
	}
}
