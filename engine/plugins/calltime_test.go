package plugins

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// A call that fails after running long (a spin stopped by its timeout)
// opens the breaker at once, for as long as its failed call time takes to
// be paid back at failedCallShare of a core; the trial after that, failing
// as long again, keeps the plugin's average below that share; quick
// failures under the burst still need breakerThreshold in a row; a call
// running when the breaker opened extends it; a spec change clears the debt.
func TestBreakerCountsFailedCallTime(t *testing.T) {
	clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
	bs := newBreakers("spinner", nil, clock.now)
	ctx := context.Background()
	spin := func(d time.Duration) error {
		_, err := guard(ctx, bs.reconcile, func() (*abi.ReconcileResponse, error) {
			clock.add(d)
			return nil, errors.New("host: timeout: the call ran past its deadline")
		})
		return err
	}
	refused := func() bool {
		_, err := bs.reconcile.allow()
		if err == nil {
			t.Fatal("allow let a call through")
		}
		return errors.Is(err, ErrCallsSuspended)
	}

	// Quick failures: the count decides.
	for i := range breakerThreshold - 1 {
		if err := spin(time.Millisecond); errors.Is(err, ErrCallsSuspended) {
			t.Fatalf("quick failure %d refused: %v", i+1, err)
		}
	}
	bs.reset()

	// One 1 s timeout: open at once, for the debt over the share.
	if err := spin(time.Second); errors.Is(err, ErrCallsSuspended) {
		t.Fatalf("the first call was refused: %v", err)
	}
	_, err := bs.reconcile.allow()
	var se *CallsSuspendedError
	if !errors.As(err, &se) || !strings.Contains(se.Cause, "failed calls that ran 1s") {
		t.Fatalf("after one 1 s failed call: %v, want suspended naming the failed call time", err)
	}
	want := time.Duration(float64(time.Second) / failedCallShare)
	if got := se.Retry.Sub(clock.now()); got != want {
		t.Fatalf("open for %v, want %v (1 s at %v of a core)", got, want, failedCallShare)
	}

	// Another call that was running meanwhile fails as long: open longer.
	bs.reconcile.done(false, errors.New("timeout"), time.Second)
	bs.reconcile.mu.Lock()
	retry := bs.reconcile.retry
	bs.reconcile.mu.Unlock()
	if got, want := retry.Sub(clock.now()), time.Duration(float64(2*time.Second)/failedCallShare); got != want {
		t.Fatalf("open for %v after a second slow failure, want %v", got, want)
	}

	// Over a long run of failed trials, the spinner's share stays under
	// failedCallShare of one core.
	start, spent := clock.now(), 2*time.Second
	for range 50 {
		bs.reconcile.mu.Lock()
		wait := bs.reconcile.retry.Sub(clock.now())
		bs.reconcile.mu.Unlock()
		clock.add(wait - time.Millisecond)
		if !refused() {
			t.Fatal("a call was let through before the open period ended")
		}
		clock.add(time.Millisecond)
		if err := spin(time.Second); errors.Is(err, ErrCallsSuspended) {
			t.Fatalf("the trial was refused: %v", err)
		}
		spent += time.Second
	}
	if share := float64(spent) / float64(clock.now().Sub(start)); share > failedCallShare {
		t.Errorf("the failing plugin took %.3f of a core, want at most %v", share, failedCallShare)
	}

	// A spec change clears the debt: the next failure is judged afresh.
	bs.observe(1)
	bs.observe(2)
	if err := spin(100 * time.Millisecond); errors.Is(err, ErrCallsSuspended) {
		t.Fatal(err)
	}
	if _, err := bs.reconcile.allow(); err != nil {
		t.Fatalf("after a spec change and a 100 ms failure: %v, want closed", err)
	}
}
