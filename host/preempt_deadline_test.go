package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// loadGuest loads a hand-assembled module on a fresh host.
func loadGuest(t *testing.T, ctx context.Context, wasm []byte, cfg Config) (*Plugin, error) {
	t.Helper()
	h, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h.Load(ctx, "guest", wasm, cfg)
}

// TestDeadlineHoldsOnInstrumentedPath runs each shape of code a hostile
// guest could spin with: every call is stopped within its timeout, the
// instance is discarded and the next call works.
func TestDeadlineHoldsOnInstrumentedPath(t *testing.T) {
	tests := []struct {
		name string
		spec guestSpec
	}{
		{"nested loops", guestSpec{reconcile: spinUnless(nestedLoops)}},
		{"loop calling a function that loops", guestSpec{reconcile: spinUnless(callInLoop), extra: [][]byte{countedLoop}}},
		{"call of a function that spins", guestSpec{reconcile: spinUnless([]byte{0x10, 0x04}), extra: [][]byte{spinLoop}}},
		{"br_table loop", guestSpec{reconcile: spinUnless(brTableLoop)}},
		// 2^39 calls of straight-line code, not one loop.
		{"straight-line code without loops", guestSpec{reconcile: spinUnless([]byte{0x10, 0x04}), extra: callTree(40, 2000)}},
	}
	const timeout = 300 * time.Millisecond
	short := &abi.ReconcileRequest{Object: abi.RawJSON(`{}`)}
	long := &abi.ReconcileRequest{Object: abi.RawJSON(`{"pad":"` + strings.Repeat("x", 2000) + `"}`)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			p, err := loadGuest(t, ctx, guestModule(tt.spec), Config{Limits: Limits{CallTimeout: timeout, PoolSize: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Preemption(); got != "loop-checks" {
				t.Fatalf("preemption = %q, want loop-checks", got)
			}
			if _, err := p.Reconcile(ctx, short); err != nil {
				t.Fatalf("a call that returns: %v", err)
			}
			for range 2 {
				start := time.Now()
				_, err := p.Reconcile(ctx, long)
				if !errors.Is(err, ErrTimeout) {
					t.Fatalf("err = %v, want ErrTimeout", err)
				}
				// The guest traps within yieldEvery checks of the deadline;
				// the slack covers the race detector on a loaded machine.
				if d := time.Since(start); d > timeout+2*time.Second {
					t.Fatalf("stopped after %v, the timeout is %v", d, timeout)
				}
				if _, err := p.Reconcile(ctx, short); err != nil {
					t.Fatalf("the call after a timeout: %v", err)
				}
			}
			if got := p.Stats().InstancesStarted; got != 3 {
				t.Fatalf("instances started = %d, want 3 (each stopped one discarded)", got)
			}
		})
	}
}

// TestDeadlineDuringLoad: code that spins while the host starts or
// describes the first instance (a start function, the version export) is
// stopped, and Load returns an error rather than hanging.
func TestDeadlineDuringLoad(t *testing.T) {
	tests := []struct {
		name string
		spec guestSpec
	}{
		// A start function runs at instantiation, before the host can
		// reach the stop global: the rewriter refuses it and wazero's
		// close-on-context-done stops it.
		{"start function", guestSpec{start: 5, extra: [][]byte{spinLoop}}},
		{"version export", guestSpec{version: append(append([]byte{}, spinLoop...), 0x41, 0x01)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := loadGuest(t, ctx, guestModule(tt.spec), Config{})
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, ErrInvalidModule) && !errors.Is(err, ErrTimeout) {
					t.Fatalf("err = %v, want a refusal", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Load did not return")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Load returned after %v", d)
			}
		})
	}
}

// TestGuestCannotResetCountdown: a module whose code writes the global
// index the countdown would take is invalid as uploaded; it must not
// become valid, with the guest holding the countdown, once instrumented.
func TestGuestCannotResetCountdown(t *testing.T) {
	// Global 1 is $count once the rewriter adds $stop (0) and $count (1).
	reset := []byte{0x03, 0x40, 0x41, 0xff, 0xff, 0xff, 0xff, 0x07, 0x24, 0x01, 0x0c, 0x00, 0x0b}
	_, err := loadGuest(t, context.Background(), guestModule(guestSpec{reconcile: spinUnless(reset)}), Config{})
	if !errors.Is(err, ErrInvalidModule) {
		t.Fatalf("err = %v, want ErrInvalidModule", err)
	}
}

// TestGuestCannotResetLoopCount: code naming the local the rewriter adds
// to count loop iterations (invalid before the rewrite, valid after) is
// refused, so a loop cannot keep its count from reaching $count.
func TestGuestCannotResetLoopCount(t *testing.T) {
	// reconcile has two parameters and one local: local 3 is the counter.
	reset := []byte{0x03, 0x40, 0x41, 0x00, 0x21, 0x03, 0x0c, 0x00, 0x0b}
	if _, err := instrument(guestModule(guestSpec{reconcile: spinUnless(reset)})); !errors.Is(err, errUninstrumentable) {
		t.Fatalf("instrument: err = %v, want errUninstrumentable", err)
	}
	_, err := loadGuest(t, context.Background(), guestModule(guestSpec{reconcile: spinUnless(reset)}), Config{})
	if !errors.Is(err, ErrInvalidModule) {
		t.Fatalf("err = %v, want ErrInvalidModule", err)
	}
}
