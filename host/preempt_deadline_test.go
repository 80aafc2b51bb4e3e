package host

import (
	"bytes"
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
		// Fewer than loopBatch turns per call go uncounted by the
		// callee's loop, 20,000 loads and stores each: the entry of a
		// function with loops is charged a whole batch, or each call would
		// run 15 long turns for one count.
		{"loop calling a function whose 15 turns are long", guestSpec{reconcile: spinUnless(callInLoop), extra: [][]byte{longShortLoop(20_000)}}},
		{"loop calling a function that returns at once", guestSpec{reconcile: spinUnless(callInLoop), extra: [][]byte{nil}}},
		{"br_if to a loop label", guestSpec{reconcile: spinUnless(brIfLoop)}},
		{"loop over a multi-value loop", guestSpec{reconcile: spinUnless(multiValueLoop)}},
		{"call_indirect of a spinning function", guestSpec{reconcile: spinUnless(callIndirectLoop), extra: [][]byte{spinLoop}, table: true}},
		// The counting local's index needs two LEB128 bytes, and the
		// local groups' count grows from 127 to 128 (two bytes).
		{"127 local groups", guestSpec{reconcileLocals: localGroups(127, 1), reconcile: spinUnless(spinLoop)}},
		// At the vet limit of 50,000 declared locals the counting local
		// (index 50,002) is one more; its index takes three bytes.
		{"50,000 locals", guestSpec{reconcileLocals: localGroups(1, 50_000), reconcile: spinUnless(spinLoop)}},
		{"a name section", guestSpec{reconcile: spinUnless(nestedLoops), custom: "name"}},
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

// hiddenLoop is spin code whose loop the rewriter would miss if it read a
// (ref null 2) block type as one byte: the heap type 2 then reads as
// `block`, whose block type swallows the loop opcode. wazero accepts
// concrete reference types in block types without any feature flag.
var hiddenLoop = []byte{
	0x02, 0x63, 0x02, // block (result (ref null 2))
	0x03, 0x40, 0x0c, 0x00, 0x0b, // loop br 0 end
	0x00, 0x0b, 0x1a, // unreachable end drop
}

// TestDeadlineHoldsWithRefTypes: value types of more than one byte
// ((ref null $t)) must not desynchronize the rewriter from the compiler;
// a loop behind one is stopped by its call's deadline like any other.
func TestDeadlineHoldsWithRefTypes(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ctx := context.Background()
	p, err := loadGuest(t, ctx, guestModule(guestSpec{reconcile: spinUnless(hiddenLoop)}), Config{Limits: Limits{CallTimeout: timeout, PoolSize: 1}})
	if err != nil {
		t.Fatal(err)
	}
	short := &abi.ReconcileRequest{Object: abi.RawJSON(`{}`)}
	long := &abi.ReconcileRequest{Object: abi.RawJSON(`{"pad":"` + strings.Repeat("x", 2000) + `"}`)}
	if _, err := p.Reconcile(ctx, short); err != nil {
		t.Fatalf("a call that returns: %v", err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := p.Reconcile(ctx, long)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
		if d := time.Since(start); d > timeout+2*time.Second {
			t.Fatalf("stopped after %v, the timeout is %v", d, timeout)
		}
	case <-time.After(timeout + 10*time.Second):
		// The guest spins in compiled code for good: this process cannot
		// recover it.
		t.Fatalf("the call ran past its deadline by 10s (preemption %q)", p.Preemption())
	}
	if _, err := p.Reconcile(ctx, short); err != nil {
		t.Fatalf("the call after a timeout: %v", err)
	}
}

// TestDeepRecursionEndsWithAClearError: a function calling itself without
// a loop ends on the call stack's limit (each entry counts down too), with
// an error, and the next call works.
func TestDeepRecursionEndsWithAClearError(t *testing.T) {
	ctx := context.Background()
	p, err := loadGuest(t, ctx, guestModule(guestSpec{reconcile: spinUnless([]byte{0x10, 0x04}), extra: [][]byte{{0x10, 0x04}}}),
		Config{Limits: Limits{CallTimeout: 5 * time.Second, PoolSize: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Preemption(); got != "loop-checks" {
		t.Fatalf("preemption = %q, want loop-checks", got)
	}
	long := &abi.ReconcileRequest{Object: abi.RawJSON(`{"pad":"` + strings.Repeat("x", 2000) + `"}`)}
	_, err = p.Reconcile(ctx, long)
	t.Logf("err = %v", err)
	if err == nil || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want the stack's limit", err)
	}
	if _, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(`{}`)}); err != nil {
		t.Fatalf("the call after: %v", err)
	}
}

// TestLoadRefusesTwoMemories: a module with two memories (multi-memory,
// whose memory indices the rewriter would otherwise have to read in every
// load and store) is refused at load, before the rewriter or the compiler
// reads its code.
func TestLoadRefusesTwoMemories(t *testing.T) {
	m := guestModule(guestSpec{reconcile: spinUnless(nestedLoops)})
	one := []byte{0x05, 0x03, 0x01, 0x00, 0x01}
	if bytes.Count(m, one) != 1 {
		t.Fatal("no memory section found")
	}
	m = bytes.Replace(m, one, []byte{0x05, 0x05, 0x02, 0x00, 0x01, 0x00, 0x01}, 1)
	_, err := loadGuest(t, context.Background(), m, Config{})
	if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), "memories") {
		t.Fatalf("err = %v, want ErrInvalidModule naming the memories", err)
	}
	t.Log(err)
}
