package serving

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// queued starts a goroutine that takes a seat of q as user and, once it has
// one, reports user on got; it returns when the goroutine waits in q.
func queued(t *testing.T, q *fairQueue, user string, got chan<- string) {
	t.Helper()
	go func() {
		if a := q.acquire(context.Background(), user); a.rejected != "" {
			got <- user + " rejected: " + a.rejected
			return
		}
		got <- user
	}()
	synctest.Wait()
}

// TestFairQueueRoundRobin fills the seats, queues many requests of one user
// and a few of two others, and checks the order in which freed seats are
// handed out: each user with a request waiting in turn, not first come
// first served.
func TestFairQueueRoundRobin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newFairQueue(2, 50, -1, time.Minute, nil)
		for range 2 {
			if a := q.acquire(context.Background(), "flood"); a.queued || a.rejected != "" {
				t.Fatalf("acquire with a seat free: %+v, want a seat at once", a)
			}
		}
		got := make(chan string, 32)
		for range 6 {
			queued(t, q, "flood", got)
		}
		queued(t, q, "bob", got)
		queued(t, q, "carol", got)
		queued(t, q, "bob", got)
		if q.queued != 9 {
			t.Fatalf("%d requests queued, want 9", q.queued)
		}
		var order []string
		for range 9 {
			q.release()
			synctest.Wait()
			order = append(order, <-got)
		}
		want := []string{"flood", "bob", "carol", "flood", "bob", "flood", "flood", "flood", "flood"}
		if !slices.Equal(order, want) {
			t.Errorf("seats went to %v, want %v", order, want)
		}
		if q.inUse != 2 || q.queued != 0 || len(q.flows) != 0 || q.ring.first != nil || q.ring.last != nil {
			t.Errorf("after the queue drained: inUse %d queued %d flows %d head %v tail %v; want 2 seats taken and nothing queued",
				q.inUse, q.queued, len(q.flows), q.ring.first, q.ring.last)
		}
		q.release()
		q.release()
		if q.inUse != 0 {
			t.Errorf("%d seats taken after every release, want 0", q.inUse)
		}
	})
}

// TestFairQueueRejects checks each way a request that finds every seat
// taken ends without one.
func TestFairQueueRejects(t *testing.T) {
	tests := []struct {
		name    string
		perUser int
		total   int
		// setup queues requests before the one checked, as alice unless
		// the name says otherwise.
		setup      []string
		cancel     bool
		wantReason string
		wantWait   time.Duration
	}{
		{name: "queuing off", perUser: -1, total: 10, wantReason: reasonConcurrencyLimit},
		{name: "user's queue full", perUser: 2, total: 10, setup: []string{"alice", "alice"}, wantReason: reasonQueueFull},
		{name: "all queues full", perUser: 2, total: 3, setup: []string{"bob", "bob", "carol"}, wantReason: reasonQueueFull},
		{name: "other users' queues do not count", perUser: 2, total: 10, setup: []string{"bob", "bob"}, wantReason: reasonTimeout, wantWait: 5 * time.Second},
		{name: "wait timeout", perUser: 2, total: 10, wantReason: reasonTimeout, wantWait: 5 * time.Second},
		{name: "cancelled", perUser: 2, total: 10, cancel: true, wantReason: reasonCancelled, wantWait: time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newFairQueue(1, tc.perUser, tc.total, 5*time.Second, nil)
				q.acquire(context.Background(), "holder")
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var wg sync.WaitGroup
				for _, u := range tc.setup {
					wg.Go(func() { q.acquire(ctx, u) })
				}
				synctest.Wait()
				if tc.cancel {
					time.AfterFunc(time.Second, cancel)
				}
				start := time.Now()
				a := q.acquire(ctx, "alice")
				if a.rejected != tc.wantReason || time.Since(start) != tc.wantWait || a.waited != tc.wantWait || a.queued != (tc.wantWait > 0) {
					t.Errorf("acquire: %+v after %v; want rejected %q after %v", a, time.Since(start), tc.wantReason, tc.wantWait)
				}
				cancel()
				wg.Wait()
				if q.queued != 0 || len(q.flows) != 0 || q.inUse != 1 {
					t.Errorf("after every waiter gave up: queued %d, flows %d, inUse %d; want 0, 0, 1", q.queued, len(q.flows), q.inUse)
				}
			})
		})
	}
}

// TestFairQueueGrantedAsItGivesUp checks that a request whose seat comes
// in the same instant as its wait timeout keeps the seat, so that no seat
// is lost.
func TestFairQueueGrantedAsItGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newFairQueue(1, 5, 5, time.Second, nil)
		q.acquire(context.Background(), "holder")
		got := make(chan admission, 1)
		go func() { got <- q.acquire(context.Background(), "alice") }()
		synctest.Wait()
		time.AfterFunc(time.Second, q.release) // the same instant as the timeout
		a := <-got
		synctest.Wait()
		if a.rejected == "" {
			q.release()
		}
		if q.inUse != 0 || q.queued != 0 {
			t.Errorf("after %+v and its release: inUse %d queued %d, want 0 and 0", a, q.inUse, q.queued)
		}
	})
}

// TestFairQueueFloodHammer runs one user who keeps 64 requests waiting
// against two users with two each, every request holding its seat for a
// millisecond, and checks that the two never wait more than a few
// releases, where first come first served would make them wait behind
// the 60 of the flood; and, with -race, that the queue is sound under
// concurrency.
func TestFairQueueFloodHammer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seats, hold, run = 4, time.Millisecond, 500 * time.Millisecond
		q := newFairQueue(seats, 100, -1, time.Minute, nil)
		ctx, cancel := context.WithTimeout(context.Background(), run)
		defer cancel()
		var mu sync.Mutex
		served := map[string]int{}
		longest := map[string]time.Duration{}
		var wg sync.WaitGroup
		worker := func(user string) {
			for ctx.Err() == nil {
				a := q.acquire(ctx, user)
				if a.rejected != "" {
					if a.rejected != reasonCancelled {
						t.Errorf("%s: rejected %s", user, a.rejected)
					}
					return
				}
				time.Sleep(hold)
				q.release()
				mu.Lock()
				served[user]++
				longest[user] = max(longest[user], a.waited)
				mu.Unlock()
			}
		}
		for i := range 64 {
			wg.Go(func() { worker("flood") })
			if i == 32 {
				for _, u := range []string{"bob", "bob", "carol", "carol"} {
					wg.Go(func() { worker(u) })
				}
			}
		}
		wg.Wait()
		t.Logf("served %v, longest waits %v", served, longest)
		for _, u := range []string{"bob", "carol"} {
			// Three flows: a waiting request is at most two turns away, and
			// a turn comes every hold/seats.
			if longest[u] > 3*hold {
				t.Errorf("%s waited up to %v, want at most %v", u, longest[u], 3*hold)
			}
			if served[u] < served["flood"]/4 {
				t.Errorf("%s served %d times, flood %d: want at least a quarter of the flood's", u, served[u], served["flood"])
			}
		}
		if q.inUse != 0 || q.queued != 0 || len(q.flows) != 0 {
			t.Errorf("after the run: inUse %d queued %d flows %d, want none", q.inUse, q.queued, len(q.flows))
		}
	})
}

// TestFairQueueManyUsers hammers the queue with real time and many users,
// each request giving up at random, for -race and the invariants.
func TestFairQueueManyUsers(t *testing.T) {
	q := newFairQueue(3, 4, 40, 20*time.Millisecond, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	reasons := map[string]int{}
	for g := range 48 {
		wg.Go(func() {
			for i := range 50 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*time.Millisecond)
				a := q.acquire(ctx, fmt.Sprint("user", g%12))
				cancel()
				mu.Lock()
				reasons[a.rejected]++
				mu.Unlock()
				if a.rejected == "" {
					time.Sleep(100 * time.Microsecond)
					q.release()
				}
			}
		})
	}
	wg.Wait()
	t.Logf("outcomes: %v", reasons)
	if reasons[""] == 0 {
		t.Errorf("no request got a seat: %v", reasons)
	}
	if q.inUse != 0 || q.queued != 0 || len(q.flows) != 0 || q.ring.first != nil {
		t.Errorf("after the run: inUse %d queued %d flows %d, want none", q.inUse, q.queued, len(q.flows))
	}
}
