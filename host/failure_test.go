package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// TestFailureSuite runs each misbehaviour against one loaded plugin while a
// well-behaved plugin on the same host keeps serving, and checks the bad
// plugin itself serves again after every failure.
func TestFailureSuite(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{})
	bad := hosttest.LoadWith(t, h, "faulty", host.Config{Limits: host.Limits{
		CallTimeout: 3 * time.Second, MemoryPages: 256, PoolSize: 1, MaxOutputBytes: 1 << 20, MaxHostCalls: 100,
	}})
	good := hosttest.LoadWith(t, h, "widget", host.Config{})
	ctx := context.Background()
	call := func(mode string) error {
		ctx := ctx
		if mode == "loop" {
			// A caller's deadline shorter than the call timeout stops the
			// guest as well, and keeps the test short.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
		}
		_, err := bad.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: map[string]string{"mode": mode}})
		return err
	}
	tests := []struct {
		name   string
		mode   string
		want   error
		detail string
		// discard: the instance must not serve again (PoolSize is 1, so
		// the next call starts a new one).
		discard bool
	}{
		{"infinite loop", "loop", host.ErrTimeout, "ran past its deadline", true},
		{"unbounded allocation", "alloc", host.ErrMemoryLimit, "cap of 256 pages", true},
		{"panic", "panic", host.ErrGuestPanic, "assignment to entry in nil map", false},
		{"huge output", "huge", host.ErrBadOutput, "exceeds the limit of 1048576", true},
		{"invalid JSON output", "badjson", host.ErrBadOutput, "not a valid reconcile document", true},
		{"flood of host calls", "flood", host.ErrHostCallLimit, "more than 100 host calls", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := bad.Stats().InstancesStarted
			err := call(tt.mode)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var ce *host.CallError
			if !errors.As(err, &ce) || ce.Plugin != "faulty" || ce.Export != "reconcile" || !strings.Contains(ce.Detail, tt.detail) {
				t.Fatalf("err = %v, want a CallError of faulty reconcile mentioning %q", err, tt.detail)
			}
			// The broken instance was discarded (or, after a recovered
			// panic, kept sound): the next call works.
			if err := call("ok"); err != nil {
				t.Fatalf("call after %s: %v", tt.mode, err)
			}
			if fresh := bad.Stats().InstancesStarted - started; fresh != map[bool]int64{true: 1, false: 0}[tt.discard] {
				t.Fatalf("%d instances started after %s; discard = %v", fresh, tt.mode, tt.discard)
			}
			if _, err := good.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj)}); err != nil {
				t.Fatalf("other plugin after %s: %v", tt.mode, err)
			}
		})
	}
	if st := bad.Stats(); st.Failures != int64(len(tests)) {
		t.Errorf("failures = %d, want %d", st.Failures, len(tests))
	}
}

func TestLoadRefusesModules(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{})
	tests := []struct {
		name   string
		wasm   []byte
		cfg    host.Config
		want   error
		detail string
	}{
		{"invalid bytes", []byte("\x00asm but not really"), host.Config{}, host.ErrInvalidModule, "invalid"},
		{"not wasm at all", []byte("#!/bin/sh\necho hi\n"), host.Config{}, host.ErrInvalidModule, "magic"},
		{"missing exports", hosttest.Module(t, "noexports"), host.Config{}, host.ErrMissingExport, "no export setpoint_abi_version"},
		{"unknown import", hosttest.Module(t, "badimport"), host.Config{}, host.ErrUnknownImport, "setpoint.launch_missiles(i32) -> i32"},
		{"memory over the cap", hosttest.Module(t, "widget"), host.Config{Limits: host.Limits{MemoryPages: 4}}, host.ErrMemoryLimit, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := h.Load(context.Background(), "bad", tt.wasm, tt.cfg)
			if err == nil {
				p.Close()
				t.Fatal("module accepted")
			}
			var me *host.ModuleError
			if !errors.Is(err, tt.want) || !errors.As(err, &me) || me.Plugin != "bad" || !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tt.want, tt.detail)
			}
			t.Log(err)
		})
	}
}

func TestNoHandler(t *testing.T) {
	p := hosttest.Load(t, "faulty", host.Config{})
	if p.HasAdmit() || p.HasFinalize() {
		t.Fatal("faulty registers reconcile only")
	}
	if _, err := p.Admit(context.Background(), &abi.AdmissionRequest{}); !errors.Is(err, host.ErrNoHandler) {
		t.Fatalf("err = %v", err)
	}
}

// TestExtismFailures: the Extism path stops a spinning guest (wazero's
// close-on-context-done) and reports a guest panic, and serves afterwards.
func TestExtismFailures(t *testing.T) {
	// A generous call timeout, since a fresh instance starts inside the call
	// after a discard (slow under -race); only the spinning call gets a
	// short deadline of its own.
	p := hosttest.Load(t, "extismwidget", host.Config{Limits: host.Limits{CallTimeout: 10 * time.Second, PoolSize: 1}})
	if p.Preemption() != "wazero" {
		t.Fatalf("preemption = %q", p.Preemption())
	}
	ctx := context.Background()
	for _, tt := range []struct {
		mode     string
		deadline time.Duration // the caller's; 0 for the call timeout only
		want     error
	}{
		{mode: "loop", deadline: 300 * time.Millisecond, want: host.ErrTimeout},
		// No short deadline here: the panic must be reported as a panic,
		// however long a loaded machine takes to reach it.
		{mode: "panic", want: host.ErrGuestPanic},
	} {
		callCtx, cancel := ctx, context.CancelFunc(func() {})
		if tt.deadline > 0 {
			callCtx, cancel = context.WithTimeout(ctx, tt.deadline)
		}
		_, err := p.Reconcile(callCtx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: map[string]string{"mode": tt.mode}})
		cancel()
		if !errors.Is(err, tt.want) {
			t.Fatalf("%s: err = %v, want %v", tt.mode, err, tt.want)
		}
		t.Log(err)
		if _, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj)}); err != nil {
			t.Fatalf("after %s: %v", tt.mode, err)
		}
	}
}
