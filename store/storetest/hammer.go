package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/store"
)

// testHammer runs random operations from many goroutines on a few keys, with
// watchers joining and leaving, then checks that one watcher from the start
// saw every revision in order and that replaying its events gives the final
// state of the store.
func (s suite) testHammer(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	start := mustRev(t, ctx, st)
	full, err := st.Watch(ctx, "", start)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Stop()
	// The collector reads the full watcher until it has the last revision,
	// which it learns on endc once the workers are done.
	var log []store.Event
	logDone := make(chan struct{})
	endc := make(chan int64, 1)
	go func() {
		defer close(logDone)
		target := int64(-1)
		for {
			if target >= 0 && (target == start || len(log) > 0 && log[len(log)-1].Revision() >= target) {
				return
			}
			select {
			case ev, ok := <-full.Events():
				if !ok {
					return
				}
				log = append(log, ev)
			case target = <-endc:
				endc = nil
			}
		}
	}()

	const workers, ops, keys = 8, 60, 6
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range ops {
				k := key(rng.IntN(keys))
				var err error
				switch rng.IntN(7) {
				case 0:
					_, err = st.Create(ctx, k, doc(fmt.Sprint(w, i)))
				case 1:
					var kv *store.KeyValue
					if kv, err = st.Get(ctx, k, store.GetOptions{}); err == nil {
						_, err = st.Update(ctx, k, doc(fmt.Sprint(w, i)), kv.ModRevision)
					}
				case 2:
					_, err = st.Update(ctx, k, doc(fmt.Sprint(w, i)), 0)
				case 3:
					var kv *store.KeyValue
					if kv, err = st.Get(ctx, k, store.GetOptions{}); err == nil {
						_, _, err = st.Delete(ctx, k, kv.ModRevision)
					}
				case 4:
					_, err = st.List(ctx, widgets, store.ListOptions{Limit: 2})
				case 5:
					var cur int64
					if cur, err = st.CurrentRevision(ctx); err == nil && cur > start {
						_, err = st.Get(ctx, k, store.GetOptions{Revision: start + 1 + rng.Int64N(cur-start)})
					}
				case 6:
					var wt store.Watcher
					if wt, err = st.Watch(ctx, widgets, start+rng.Int64N(3)); err == nil {
						select {
						case <-wt.Events():
						default:
						}
						wt.Stop()
					}
				}
				switch {
				case err == nil, errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrAlreadyExists),
					errors.Is(err, store.ErrConflict):
				default:
					errc <- fmt.Errorf("worker %d op %d: %w", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	end := mustRev(t, ctx, st)
	final, err := st.List(ctx, "", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	endc <- end
	<-logDone
	if int64(len(log)) < end-start {
		t.Fatalf("watcher saw %d events, want %d; it ended with %v", len(log), end-start, full.Err())
	}
	state := map[string]store.KeyValue{}
	for i, ev := range log {
		if ev.Revision() != start+1+int64(i) {
			t.Fatalf("event %d at revision %d, want %d", i, ev.Revision(), start+1+int64(i))
		}
		if ev.Revision() > end {
			break
		}
		switch ev.Type {
		case store.Deleted:
			delete(state, ev.Object.Key)
		default:
			state[ev.Object.Key] = ev.Object
		}
	}
	want := make([]store.KeyValue, 0, len(state))
	for _, kv := range final.Items {
		want = append(want, state[kv.Key])
	}
	if len(state) != len(final.Items) {
		t.Fatalf("replayed %d documents, listed %d", len(state), len(final.Items))
	}
	if d := cmp.Diff(want, final.Items); d != "" {
		t.Errorf("replayed state (-watch +list):\n%s", d)
	}
}
