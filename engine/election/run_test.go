package election_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/election"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// loops are the leader-only loops of two replicas, which stop slowly; they
// record when each runs and whether two ever ran at once.
type loops struct {
	mu      sync.Mutex
	active  int
	overlap bool
	starts  [2][]time.Time
	stops   [2][]time.Time
}

func (ls *loops) run(i int) func(context.Context) error {
	return func(ctx context.Context) error {
		ls.mu.Lock()
		ls.active++
		ls.overlap = ls.overlap || ls.active > 1
		ls.starts[i] = append(ls.starts[i], time.Now())
		ls.mu.Unlock()
		<-ctx.Done()
		time.Sleep(150 * time.Millisecond) // a slow stop
		ls.mu.Lock()
		ls.active--
		ls.stops[i] = append(ls.stops[i], time.Now())
		ls.mu.Unlock()
		return nil
	}
}

func (ls *loops) started(i int) int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.starts[i])
}

// TestRun runs a slow-stopping loop under Run on two replicas: one runs it;
// cut off, it stops and the other takes over; the other, stopped, releases
// the lease only after its loop returned, and the first takes over at once.
// The loops never run at once.
func TestRun(t *testing.T) {
	rs := newReplicas(t, 2)
	ls := &loops{}
	var cancels [2]context.CancelFunc
	var wg sync.WaitGroup
	for i, r := range rs {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		el := newLeases(t, r, []string{"replica-0", "replica-1"}[i], short).Elector("loop")
		wg.Go(func() {
			if err := election.Run(ctx, quietLogger(), el, ls.run(i)); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	defer wg.Wait()
	defer cancels[1]()
	defer cancels[0]()

	first := -1
	testsupport.Eventually(t, 5*time.Second, "a loop runs", func() bool {
		for i := range 2 {
			if ls.started(i) > 0 {
				first = i
				return true
			}
		}
		return false
	})
	other := 1 - first
	rs[first].store.mode.Store(failing)
	testsupport.Eventually(t, 3*testLeaseDuration, "the other replica takes over", func() bool { return ls.started(other) == 1 })
	rs[first].store.mode.Store(connected)
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	cancels[other]()
	testsupport.Eventually(t, 3*time.Second, "the first replica takes over again", func() bool { return ls.started(first) == 2 })

	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.overlap {
		t.Error("both replicas ran the loop at once")
	}
	if len(ls.stops[first]) < 1 || len(ls.stops[other]) != 1 {
		t.Fatalf("stops %d and %d", len(ls.stops[first]), len(ls.stops[other]))
	}
	if stopped, restarted := ls.stops[other][0], ls.starts[first][1]; !restarted.After(stopped) {
		t.Errorf("the first replica restarted at %v, before the other's loop stopped at %v", restarted, stopped)
	} else if d := restarted.Sub(released); d >= testLeaseDuration {
		t.Errorf("takeover %v after the stop: not by release", d)
	} else {
		t.Logf("takeover %v after the stop (the loop stops in 150ms)", d.Round(time.Millisecond))
	}
}

// TestRunRetriesAFailedLoop: a loop that fails while leading gives up the
// term, and Run campaigns again a second later, not in a busy loop.
func TestRunRetriesAFailedLoop(t *testing.T) {
	rs := newReplicas(t, 1)
	el := newLeases(t, rs[0], "replica-0", short).Elector("failing")
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	var runs atomic.Int32
	err := election.Run(ctx, quietLogger(), el, func(context.Context) error {
		runs.Add(1)
		return errors.New("test: the loop failed")
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n < 2 || n > 4 {
		t.Fatalf("the failing loop ran %d times in 2.5s, want 2 to 4 (one a second)", n)
	}
}
