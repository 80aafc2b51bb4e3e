package plugins

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// scriptedCaller fails its calls while failing is set, and counts them.
type scriptedCaller struct {
	mu      sync.Mutex
	failing bool
	calls   int
}

func (s *scriptedCaller) call() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.failing {
		return errors.New("wasm error: out of bounds memory access")
	}
	return nil
}

func (s *scriptedCaller) set(failing bool) {
	s.mu.Lock()
	s.failing = failing
	s.mu.Unlock()
}

func (s *scriptedCaller) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *scriptedCaller) Reconcile(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	if err := s.call(); err != nil {
		return nil, err
	}
	return &abi.ReconcileResponse{}, nil
}

func (s *scriptedCaller) Admit(context.Context, *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	if err := s.call(); err != nil {
		return nil, err
	}
	return &abi.AdmissionResponse{Allowed: true}, nil
}

func (s *scriptedCaller) Finalize(context.Context, *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	if err := s.call(); err != nil {
		return nil, err
	}
	return &abi.FinalizeResponse{Done: true}, nil
}

type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func eventReasons(evs []abi.Event) string {
	var r []string
	for _, e := range evs {
		r = append(r, e.Type+"/"+e.Reason)
	}
	return strings.Join(r, ",")
}

// The breaker opens after breakerThreshold failed calls in a row, refuses
// calls while open without calling the plugin, lets one call through after
// the open period, opens again for twice as long when it fails, and closes
// when a call succeeds; each change shows in the condition, the events
// and the metrics, and admission calls have a breaker of their own.
func TestBreakerOpensBacksOffAndCloses(t *testing.T) {
	reg := prometheus.NewRegistry()
	met, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
	bs := newBreakers("hostile", met, clock.now)
	sc := &scriptedCaller{failing: true}
	c := &counters{}
	bc := breakerCaller{countingCaller: countingCaller{Caller: sc, c: c}, b: bs}
	ctx := context.Background()
	reconcile := func() error { _, err := bc.Reconcile(ctx, &abi.ReconcileRequest{}); return err }
	openGauge := met.breakerOpen.WithLabelValues("hostile", "reconcile")
	refused := met.suspended.WithLabelValues("hostile", "reconcile")

	if bs.condition(1) != nil {
		t.Fatal("condition before the breaker ever opened")
	}
	for i := range breakerThreshold {
		if err := reconcile(); err == nil || errors.Is(err, ErrCallsSuspended) {
			t.Fatalf("call %d: %v, want the plugin's own failure", i+1, err)
		}
	}
	for range 100 {
		err := reconcile()
		var se *CallsSuspendedError
		if !errors.As(err, &se) || se.Plugin != "hostile" || !strings.Contains(err.Error(), "out of bounds memory access") {
			t.Fatalf("call while open: %v, want a CallsSuspendedError naming the plugin and the last failure", err)
		}
	}
	if got := sc.count(); got != breakerThreshold {
		t.Fatalf("the plugin was called %d times, want %d: an open breaker calls nothing", got, breakerThreshold)
	}
	if got := c.calls.Load(); got != breakerThreshold {
		t.Errorf("status calls = %d, want %d (refused calls are not calls)", got, breakerThreshold)
	}
	if g, r := testutil.ToFloat64(openGauge), testutil.ToFloat64(refused); g != 1 || r != 100 {
		t.Errorf("metrics: calls_suspended %v, calls_refused_total %v; want 1 and 100", g, r)
	}
	cond := bs.condition(3)
	if cond["status"] != "True" || cond["reason"] != ReasonRepeatedFailures || !strings.Contains(cond["message"].(string), "reconcile and finalize calls suspended") {
		t.Errorf("condition = %v", cond)
	}
	if got := eventReasons(bs.events()); got != "Warning/RepeatedFailures" {
		t.Errorf("events = %q, want one Warning RepeatedFailures", got)
	}
	if got := eventReasons(bs.events()); got != "" {
		t.Errorf("events again = %q, want none: each change is told once", got)
	}

	// Admission calls have their own breaker: still closed.
	if _, err := bc.Admit(ctx, &abi.AdmissionRequest{}); errors.Is(err, ErrCallsSuspended) {
		t.Fatalf("admit refused by the reconcile breaker: %v", err)
	}

	// Half-open after the open period: one trial, which fails: open for
	// twice as long.
	clock.add(breakerMinOpen)
	before := sc.count()
	if err := reconcile(); err == nil || errors.Is(err, ErrCallsSuspended) {
		t.Fatalf("trial call: %v, want the plugin's failure", err)
	}
	if sc.count() != before+1 {
		t.Fatal("the trial did not call the plugin")
	}
	clock.add(breakerMinOpen)
	if err := reconcile(); !errors.Is(err, ErrCallsSuspended) {
		t.Fatalf("call %v after a failed trial: %v, want refused (open for %v now)", breakerMinOpen, err, 2*breakerMinOpen)
	}
	clock.add(breakerMinOpen)
	// The trial succeeds: closed, and calls flow.
	sc.set(false)
	for i := range 10 {
		if err := reconcile(); err != nil {
			t.Fatalf("call %d after recovery: %v", i, err)
		}
	}
	if g := testutil.ToFloat64(openGauge); g != 0 {
		t.Errorf("calls_suspended = %v after recovery, want 0", g)
	}
	cond = bs.condition(3)
	if cond["status"] != "False" || cond["reason"] != ReasonCallsResumed {
		t.Errorf("condition after recovery = %v", cond)
	}
	if got := eventReasons(bs.events()); got != "Normal/CallsResumed" {
		t.Errorf("events after recovery = %q", got)
	}

	// Backoff starts again from the minimum after a recovery; it is capped.
	sc.set(true)
	for range breakerThreshold {
		_ = reconcile()
	}
	for range 20 {
		clock.add(breakerMaxOpen)
		_ = reconcile() // a failed trial each time
	}
	bs.reconcile.mu.Lock()
	openFor := bs.reconcile.openFor
	bs.reconcile.mu.Unlock()
	if openFor != breakerMaxOpen {
		t.Errorf("open for %v after many failed trials, want the cap %v", openFor, breakerMaxOpen)
	}

	// A spec change (new generation) closes it at once.
	bs.observe(1)
	bs.observe(2)
	if err := reconcile(); errors.Is(err, ErrCallsSuspended) {
		t.Fatalf("call after a spec change: %v, want the plugin called", err)
	}

	// A trial that fails after a reset counts as any failure: the breaker
	// stays closed until the threshold.
	b := newBreaker("p", "admit", clock.now, nil, nil)
	for range breakerThreshold {
		b.done(false, errors.New("trap"), 0)
	}
	clock.add(breakerMinOpen)
	trial, err := b.allow()
	if !trial || err != nil {
		t.Fatalf("allow after the open period: trial %v, %v", trial, err)
	}
	b.reset()
	b.done(true, errors.New("trap"), 0)
	if _, err := b.allow(); err != nil {
		t.Fatalf("after a reset and one failed call: %v, want closed", err)
	}
}

// A call the caller gave up on (its context done) does not count against
// the plugin, nor does it use up the trial.
func TestBreakerIgnoresCallsTheCallerCancelled(t *testing.T) {
	clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
	b := newBreaker("p", "admit", clock.now, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 2 * breakerThreshold {
		_, _ = guard(ctx, b, func() (int, error) { return 0, context.Canceled })
	}
	if _, err := guard(context.Background(), b, func() (int, error) { return 1, nil }); err != nil {
		t.Fatalf("call after cancelled ones: %v", err)
	}
}

// An admission plugin whose calls are suspended is not called: with
// failurePolicy Fail the write is refused at once with a message that
// names the plugin and why; with Ignore it goes through.
func TestSuspendedAdmissionFollowsFailurePolicy(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		sc := &scriptedCaller{failing: true}
		bs := newBreakers("p", nil, time.Now)
		caller := breakerCaller{countingCaller: countingCaller{Caller: sc, c: &counters{}}, b: bs}
		a := openAdmitter(&admissionBinding{plugin: "p", caller: caller, resources: []string{"*"}, ignore: ignore})
		for range breakerThreshold {
			_ = a.Validate(context.Background(), widgetRequest(engine.OpCreate))
		}
		for i := range 20 {
			err := a.Validate(context.Background(), widgetRequest(engine.OpCreate))
			switch {
			case ignore && err != nil:
				t.Fatalf("Ignore, write %d: %v, want it let through", i, err)
			case !ignore && (!apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `admission plugin "p" failed (failurePolicy Fail): plugin "p": admit calls suspended`)):
				t.Fatalf("Fail, write %d: %v, want a refusal naming the plugin and the suspension", i, err)
			}
		}
		if got := sc.count(); got != breakerThreshold {
			t.Errorf("ignore=%v: the plugin was called %d times, want %d", ignore, got, breakerThreshold)
		}
	}
}

// A success forgets the failures before it, whether it takes the breaker's
// lock or not: below the threshold, failures interleaved with successes
// never open it.
func TestBreakerSuccessForgetsFailures(t *testing.T) {
	clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
	b := newBreaker("p", "reconcile", clock.now, nil, nil)
	boom := errors.New("boom")
	for round := range 3 {
		for range breakerThreshold - 1 {
			_, _ = guard(context.Background(), b, func() (int, error) { return 0, boom })
		}
		if b.healthy.Load() {
			t.Fatalf("round %d: healthy after failures", round)
		}
		if _, err := guard(context.Background(), b, func() (int, error) { return 1, nil }); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if v := b.view(); v.open || v.failures != 0 || !b.healthy.Load() {
			t.Fatalf("round %d: after a success open=%v failures=%d healthy=%v, want closed, 0, healthy", round, v.open, v.failures, b.healthy.Load())
		}
	}
}

// Concurrent calls, failing and succeeding, through one breaker (go test
// -race): the lock-free path of healthy calls agrees with the locked state
// once the calls are done.
func TestBreakerConcurrentCalls(t *testing.T) {
	clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
	b := newBreaker("p", "reconcile", clock.now, nil, nil)
	boom := errors.New("boom")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				var err error
				if (i+g)%9 == 0 {
					err = boom
				}
				_, _ = guard(context.Background(), b, func() (int, error) { return 0, err })
			}
		})
	}
	wg.Wait()
	b.mu.Lock()
	want := b.state == breakerClosed && b.failures == 0
	b.mu.Unlock()
	if got := b.healthy.Load(); got != want {
		t.Fatalf("healthy = %v, but the locked state says %v", got, want)
	}
	b.reset()
	if _, err := guard(context.Background(), b, func() (int, error) { return 1, nil }); err != nil || !b.healthy.Load() {
		t.Fatalf("after reset: %v, healthy %v", err, b.healthy.Load())
	}
}
