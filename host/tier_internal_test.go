package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// loadInterpreted loads a hand-assembled module on the interpreter of a
// fresh host whose background compile waits for hold (or its context)
// and then fails with err, or goes on when err is nil.
func loadInterpreted(t *testing.T, wasm []byte, cfg Config, opts Options, hold <-chan struct{}, err error) (*Host, *Plugin) {
	t.Helper()
	opts.InterpreterFirst, opts.InterpreterMinCodeBytes = true, 1
	h, e := New(opts)
	if e != nil {
		t.Fatal(e)
	}
	t.Cleanup(func() { h.Close() })
	h.tierCompileHook = func(ctx context.Context) error {
		select {
		case <-hold:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p, e := h.Load(context.Background(), "guest", wasm, cfg)
	if e != nil {
		t.Fatal(e)
	}
	if got := p.Tier(); got != TierInterpreter {
		t.Fatalf("tier = %q, want %q", got, TierInterpreter)
	}
	return h, p
}

// TestDeadlineHoldsOnInterpreter: a guest spinning on the interpreter is
// stopped at its call timeout by wazero's close-on-context-done, whether
// its compiled code is to use the loop checks or not, and the next call
// works.
func TestDeadlineHoldsOnInterpreter(t *testing.T) {
	tests := []struct {
		name, preemption string
		spec             guestSpec
	}{
		{"loop checks", "loop-checks", guestSpec{reconcile: spinUnless(nestedLoops)}},
		{"close on context done", "wazero", guestSpec{noYield: true, reconcile: spinUnless(nestedLoops)}},
		{"call of a function that spins", "loop-checks", guestSpec{reconcile: spinUnless([]byte{0x10, 0x04}), extra: [][]byte{spinLoop}}},
	}
	const timeout = 200 * time.Millisecond
	short := &abi.ReconcileRequest{Object: abi.RawJSON(`{}`)}
	long := &abi.ReconcileRequest{Object: abi.RawJSON(`{"pad":"` + strings.Repeat("x", 2000) + `"}`)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			_, p := loadInterpreted(t, guestModule(tt.spec), Config{Limits: Limits{CallTimeout: timeout, PoolSize: 1}}, Options{}, nil, nil)
			if got := p.Preemption(); got != tt.preemption {
				t.Fatalf("preemption = %q, want %q", got, tt.preemption)
			}
			if _, err := p.Reconcile(ctx, short); err != nil {
				t.Fatalf("a call that returns: %v", err)
			}
			start := time.Now()
			_, err := p.Reconcile(ctx, long)
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			if d := time.Since(start); d > timeout+2*time.Second {
				t.Fatalf("stopped after %v, the timeout is %v", d, timeout)
			}
			if _, err := p.Reconcile(ctx, short); err != nil {
				t.Fatalf("the call after a timeout: %v", err)
			}
			if got := p.Tier(); got != TierInterpreter {
				t.Fatalf("tier = %q, want %q", got, TierInterpreter)
			}
		})
	}
}

// TestTierCompileFailureKeepsInterpreter: when the background compile
// cannot run (here: no compile slot frees before the compile timeout) the
// version keeps serving on the interpreter, says why, and counts the
// failure; a later load of the module tries the compiler again.
func TestTierCompileFailureKeepsInterpreter(t *testing.T) {
	hold := make(chan struct{})
	wasm := guestModule(guestSpec{reconcile: spinUnless(nestedLoops)})
	h, p := loadInterpreted(t, wasm, Config{Limits: Limits{PoolSize: 1}},
		Options{MaxCompiles: 1, CompileTimeout: 300 * time.Millisecond}, hold, nil)
	// Every compile slot taken, then the background compile goes on to
	// wait for one.
	busy, err := h.gate.enter(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	close(hold)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = p.WaitCompiled(ctx)
	busy()
	if err == nil || !strings.Contains(err.Error(), "waiting for a compile slot") || !strings.Contains(err.Error(), "--plugin-compile-timeout") {
		t.Fatalf("WaitCompiled = %v, want the compile slot's timeout", err)
	}
	if got := p.TierError(); got != err.Error() || !strings.Contains(got, "keeps running on the interpreter") {
		t.Fatalf("TierError = %q", got)
	}
	if got := p.Tier(); got != TierInterpreter {
		t.Fatalf("tier = %q, want %q", got, TierInterpreter)
	}
	if got := h.TierStats(); got != (TierStats{Interpreted: 1, Failed: 1}) {
		t.Fatalf("tier stats %+v, want one interpreted load and one failure", got)
	}
	if _, err := p.Reconcile(context.Background(), &abi.ReconcileRequest{Object: abi.RawJSON(`{}`)}); err != nil {
		t.Fatalf("a call after the failed compile: %v", err)
	}
	// Nothing marked the module compiled: the next load starts on the
	// interpreter again.
	h.tierCompileHook = nil
	q, err := h.Load(context.Background(), "guest", wasm, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.WaitCompiled(ctx); err != nil {
		t.Fatalf("the second load's compile: %v", err)
	}
	if got := q.Tier(); got != TierCompiled {
		t.Fatalf("tier = %q, want %q", got, TierCompiled)
	}
}

// TestTierCloseStopsCompile: closing a version whose background compile is
// waiting stops the compile and counts no failure.
func TestTierCloseStopsCompile(t *testing.T) {
	h, p := loadInterpreted(t, guestModule(guestSpec{reconcile: spinUnless(nestedLoops)}), Config{}, Options{}, nil, nil)
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	if got := h.TierStats(); got != (TierStats{Interpreted: 1}) {
		t.Fatalf("tier stats %+v, want one interpreted load and nothing else", got)
	}
	if got := h.GuestMemoryReserved(); got != 0 {
		t.Fatalf("%d bytes reserved after close", got)
	}
}

// TestTierAdoptWhileCompiling: an upload's checked version is adopted by
// its Plugin while its background compile runs; the rename and the
// compile's first instance do not race.
func TestTierAdoptWhileCompiling(t *testing.T) {
	hold := make(chan struct{})
	_, p := loadInterpreted(t, guestModule(guestSpec{reconcile: spinUnless(nestedLoops)}), Config{}, Options{}, hold, nil)
	close(hold)
	if !p.Adopt("renamed", Config{}) {
		t.Fatal("Adopt refused the same config")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitCompiled(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Name() != "renamed" || p.Tier() != TierCompiled {
		t.Fatalf("name %q, tier %q", p.Name(), p.Tier())
	}
	if _, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(`{}`)}); err != nil {
		t.Fatal(err)
	}
}

// TestTierSlowStartLoadsCompiled: a module whose start runs far longer on
// the interpreter than compiled (here: its version export counts to 200
// million) passes the interpreter's start budget and loads compiled, as
// it would without the interpreter.
func TestTierSlowStartLoadsCompiled(t *testing.T) {
	count := append([]byte{0x03, 0x40, 0x23, 0x00, 0x41, 0x01, 0x6a, 0x24, 0x00, 0x23, 0x00, 0x41}, appendSleb(nil, 200_000_000)...)
	count = append(count, 0x49, 0x0d, 0x00, 0x0b) // lt_u br_if 0 end
	count = appendSleb(append(count, 0x41), int64(abi.Version))
	wasm := guestModule(guestSpec{globals: 1, version: count})
	h, err := New(Options{InterpreterFirst: true, InterpreterMinCodeBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	start := time.Now()
	p, err := h.Load(context.Background(), "slow", wasm, Config{Limits: Limits{CallTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Logf("loaded in %v", time.Since(start))
	if got := p.Tier(); got != TierCompiled {
		t.Fatalf("tier = %q, want %q", got, TierCompiled)
	}
	if got := h.TierStats(); got != (TierStats{}) {
		t.Fatalf("tier stats %+v, want none: no version served on the interpreter", got)
	}
}

// TestTierUpWaitsForUse: the background compile of a version on the
// interpreter starts at its first call, and without one only after
// tierUpDelay, so that it does not take the cores from the steps that
// follow an upload.
func TestTierUpWaitsForUse(t *testing.T) {
	for _, call := range []bool{true, false} {
		t.Run(map[bool]string{true: "called", false: "idle"}[call], func(t *testing.T) {
			h, err := New(Options{InterpreterFirst: true, InterpreterMinCodeBytes: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			started := make(chan time.Time, 1)
			h.tierCompileHook = func(context.Context) error {
				started <- time.Now()
				return nil
			}
			ctx := context.Background()
			p, err := h.Load(ctx, "guest", guestModule(guestSpec{reconcile: spinUnless(nestedLoops)}), Config{})
			if err != nil {
				t.Fatal(err)
			}
			loaded := time.Now()
			if call {
				if _, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(`{}`)}); err != nil {
					t.Fatal(err)
				}
			}
			at := <-started
			switch waited := at.Sub(loaded); {
			case call && waited >= tierUpDelay:
				t.Errorf("the compile started %v after the load though the version was called", waited)
			case !call && waited < tierUpDelay-50*time.Millisecond:
				t.Errorf("the compile of an idle version started %v after the load, before %v", waited, tierUpDelay)
			}
			if err := p.WaitCompiled(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
