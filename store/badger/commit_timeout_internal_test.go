package badger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

// A write whose context ends while the disk does not complete its group
// (held here by taking closeMu, as a stalled commit holds it) returns
// ErrWriteTimedOut at once, the leader's as well as a queued one's; both
// writes stay queued and are committed once the disk is back, and later
// writes go on.
func TestWriteTimesOutWhileTheDiskStalls(t *testing.T) {
	db, err := Open(t.TempDir(), Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bg := context.Background()

	db.closeMu.Lock() // the disk stalls
	stalled := true
	defer func() {
		if stalled {
			db.closeMu.Unlock()
		}
	}()
	type result struct {
		err  error
		took time.Duration
	}
	write := func(key string, wait time.Duration) <-chan result {
		out := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(bg, wait)
			defer cancel()
			t0 := time.Now()
			_, err := db.Create(ctx, key, []byte(`{"k":"`+key+`"}`))
			out <- result{err, time.Since(t0)}
		}()
		return out
	}
	leader := write("/stall/leader", 200*time.Millisecond)
	// The second write queues behind the leader's group.
	waitQueue(t, db, func(q *writeQueue) bool { return q.leading })
	queued := write("/stall/queued", 300*time.Millisecond)
	for name, ch := range map[string]<-chan result{"leader": leader, "queued": queued} {
		select {
		case r := <-ch:
			if !errors.Is(r.err, store.ErrWriteTimedOut) || !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("%s write on a stalled disk: %v, want ErrWriteTimedOut and the deadline", name, r.err)
			}
			if r.took > 2*time.Second {
				t.Errorf("%s write returned after %v, want soon after its 200-300 ms deadline", name, r.took)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s write on a stalled disk did not return after its deadline", name)
		}
	}

	stalled = false
	db.closeMu.Unlock() // the disk is back
	if _, err := db.Create(bg, "/stall/after", []byte(`{}`)); err != nil {
		t.Fatalf("write after the stall: %v", err)
	}
	for _, key := range []string{"/stall/leader", "/stall/queued", "/stall/after"} {
		if _, err := db.Get(bg, key, store.GetOptions{}); err != nil {
			t.Errorf("%s after the stall: %v, want committed", key, err)
		}
	}
}
