package host_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// TestTierSwitchUnderCalls loads a real module of each ABI on the
// interpreter, calls it without pause from several goroutines while its
// background compile is held back and then let go, and checks that the
// calls move to compiled code with none failing, that the pool's memory
// reservations are all given back, and that a later load of the module
// goes straight to compiled code.
func TestTierSwitchUnderCalls(t *testing.T) {
	for _, tt := range []struct{ name, module string }{
		{"native ABI", "widget-c"},
		{"Extism ABI", "widget-as"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wasm := hosttest.Module(t, tt.module)
			h := hosttest.NewHost(t, host.Options{CacheDir: t.TempDir(), InterpreterFirst: true, InterpreterMinCodeBytes: 1})
			release := make(chan struct{})
			host.SetTierCompileHook(h, func(ctx context.Context) error {
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			ctx := context.Background()
			p, err := h.Load(ctx, tt.module, wasm, host.Config{Limits: host.Limits{PoolSize: 3}})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Tier(); got != host.TierInterpreter {
				t.Fatalf("tier after load = %q, want %q", got, host.TierInterpreter)
			}
			req := &abi.ReconcileRequest{Object: abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","uid":"u1","generation":1},"spec":{"size":"huge"}}`)}
			var calls, interpreted, compiled atomic.Int64
			var failed atomic.Pointer[error]
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						tier := p.Tier()
						if _, err := p.Reconcile(ctx, req); err != nil {
							failed.CompareAndSwap(nil, &err)
							return
						}
						calls.Add(1)
						if tier == host.TierInterpreter {
							interpreted.Add(1)
						} else {
							compiled.Add(1)
						}
					}
				})
			}
			waitFor := func(what string, cond func() bool) {
				t.Helper()
				deadline := time.Now().Add(60 * time.Second)
				for !cond() {
					if e := failed.Load(); e != nil {
						close(stop)
						wg.Wait()
						t.Fatalf("a call failed: %v", *e)
					}
					if time.Now().After(deadline) {
						t.Fatalf("no %s within 60 s", what)
					}
					time.Sleep(time.Millisecond)
				}
			}
			waitFor("interpreted calls", func() bool { return interpreted.Load() >= 20 })
			close(release)
			waitFor("switch", func() bool { return p.Tier() == host.TierCompiled })
			after := calls.Load()
			waitFor("compiled calls", func() bool { return calls.Load() >= after+20 && compiled.Load() >= 20 })
			close(stop)
			wg.Wait()
			if e := failed.Load(); e != nil {
				t.Fatalf("a call failed: %v", *e)
			}
			if err := p.WaitCompiled(ctx); err != nil {
				t.Fatalf("WaitCompiled: %v", err)
			}
			st := p.Stats()
			if st.Failures != 0 || st.Calls != calls.Load() {
				t.Fatalf("stats %+v, want %d calls and no failure", st, calls.Load())
			}
			if got := h.TierStats(); got != (host.TierStats{Interpreted: 1, Switched: 1}) {
				t.Fatalf("tier stats %+v, want one interpreted load and one switch", got)
			}
			if st.IdleInstances > 3 {
				t.Fatalf("%d idle instances, over the pool size of 3", st.IdleInstances)
			}
			// The interpreter's instances were closed: what stays reserved
			// is the compiled instances' caps.
			if got, max := h.GuestMemoryReserved(), int64(3)*1024*65536; got > max {
				t.Fatalf("%d bytes of guest memory reserved, more than the pool's 3 instances", got)
			}
			p.Close()
			if got := h.GuestMemoryReserved(); got != 0 {
				t.Fatalf("%d bytes of guest memory reserved after close, want 0", got)
			}

			again, err := h.Load(ctx, tt.module, wasm, host.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if got := again.Tier(); got != host.TierCompiled {
				t.Fatalf("tier of a second load = %q, want %q (compiled before)", got, host.TierCompiled)
			}
			if _, err := again.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d calls on the interpreter, %d compiled", interpreted.Load(), compiled.Load())
		})
	}
}
