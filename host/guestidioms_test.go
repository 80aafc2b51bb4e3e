package host_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

func reconcileMode(ctx context.Context, p *host.Plugin, config map[string]string) (*abi.ReconcileResponse, error) {
	return p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: config})
}

// TestSleepHonoursDeadline: a guest asleep in WASI poll_oneoff (Go's
// time.Sleep) is stopped at its call timeout, on both ABIs and on both
// preemption paths, and its instance is discarded.
func TestSleepHonoursDeadline(t *testing.T) {
	for _, tt := range []struct {
		name, module string
		cfg          host.Config
	}{
		{"native loop-checks", "sleeper", host.Config{}},
		{"extism", "extismkit", host.Config{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Limits = host.Limits{CallTimeout: 300 * time.Millisecond, PoolSize: 1}
			p := hosttest.Load(t, tt.module, tt.cfg)
			ctx := context.Background()
			started := p.Stats().InstancesStarted
			t0 := time.Now()
			_, err := reconcileMode(ctx, p, map[string]string{"mode": "sleep", "sleep": "60s"})
			took := time.Since(t0)
			t.Logf("%s (preemption %s): a 60s sleep under a 300ms call timeout returned after %v: %v", tt.module, p.Preemption(), took, err)
			if !errors.Is(err, host.ErrTimeout) {
				t.Fatalf("err = %v, want %v", err, host.ErrTimeout)
			}
			if took > 5*time.Second {
				t.Fatalf("the sleeping call took %v; its timeout is 300ms", took)
			}
			// A short sleep still sleeps, on a fresh instance.
			t0 = time.Now()
			if _, err := reconcileMode(ctx, p, map[string]string{"mode": "sleep", "sleep": "50ms"}); err != nil {
				t.Fatalf("short sleep: %v", err)
			}
			if d := time.Since(t0); d < 50*time.Millisecond {
				t.Fatalf("a 50ms sleep returned after %v", d)
			}
			if n := p.Stats().InstancesStarted - started; n != 1 {
				t.Fatalf("%d instances started after the timeout, want 1 (the timed-out one discarded)", n)
			}
		})
	}
	t.Run("caller deadline", func(t *testing.T) {
		// A caller's deadline shorter than the call timeout holds too, on
		// wazero's close-on-context-done path (an Extism module has it).
		p := hosttest.Load(t, "extismkit", host.Config{Limits: host.Limits{CallTimeout: 20 * time.Second, PoolSize: 1}})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		_, err := reconcileMode(ctx, p, map[string]string{"mode": "sleep", "sleep": "60s"})
		if !errors.Is(err, host.ErrTimeout) || time.Since(t0) > 5*time.Second {
			t.Fatalf("err = %v after %v, want a timeout within 5s", err, time.Since(t0))
		}
	})
}

// TestTrapDiscardsInstance: a Wasm trap is reported as host: trap, not as a
// guest failure, and the instance that trapped never serves again, on both
// ABIs; a recovered panic keeps its instance.
func TestTrapDiscardsInstance(t *testing.T) {
	for _, tt := range []struct {
		module, mode string
		want         error
		discard      bool
	}{
		{"faulty", "trap", host.ErrTrap, true},
		{"extismkit", "trap", host.ErrTrap, true},
		{"extismkit", "panic", host.ErrGuestPanic, false},
		// error_set fails the call whatever the export returns, as a
		// guest failure.
		{"extismkit", "errorzero", host.ErrGuestPanic, false},
	} {
		t.Run(tt.module+" "+tt.mode, func(t *testing.T) {
			p := hosttest.Load(t, tt.module, host.Config{Limits: host.Limits{CallTimeout: 10 * time.Second, PoolSize: 1}})
			ctx := context.Background()
			started := p.Stats().InstancesStarted
			_, err := reconcileMode(ctx, p, map[string]string{"mode": tt.mode})
			t.Log(err)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.want == host.ErrTrap && errors.Is(err, host.ErrGuestPanic) {
				t.Fatalf("a trap reported as a guest failure: %v", err)
			}
			if _, err := reconcileMode(ctx, p, nil); err != nil {
				t.Fatalf("after %s: %v", tt.mode, err)
			}
			fresh := p.Stats().InstancesStarted - started
			if want := map[bool]int64{true: 1, false: 0}[tt.discard]; fresh != want {
				t.Fatalf("%d instances started after %s, want %d", fresh, tt.mode, want)
			}
		})
	}
}

// lockedBuffer is a log sink the tests read while calls write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestExtismKitIdioms: config_get serves the Plugin's configuration,
// var_get and var_set keep values on the instance, and the kit's log
// functions reach the plugin's log like the log host function.
func TestExtismKitIdioms(t *testing.T) {
	var logs lockedBuffer
	h := hosttest.NewHost(t, host.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	p := hosttest.LoadWith(t, h, "extismkit", host.Config{Limits: host.Limits{PoolSize: 1, CallTimeout: 10 * time.Second}})
	ctx := context.Background()

	resp, err := reconcileMode(ctx, p, map[string]string{"mode": "config", "greeting": "hello, kit"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Status.String("greeting"); got != "hello, kit" || !resp.Status.Bool("found") {
		t.Fatalf("config_get: status %s", resp.Status)
	}
	resp, err = reconcileMode(ctx, p, map[string]string{"mode": "config"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status.Bool("found") {
		t.Fatalf("config_get of a key the configuration lacks: status %s", resp.Status)
	}

	for want := int64(1); want <= 3; want++ {
		resp, err := reconcileMode(ctx, p, map[string]string{"mode": "var"})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Status.Int("n"); got != want {
			t.Fatalf("var: call %d counted %d", want, got)
		}
	}

	resp, err = reconcileMode(ctx, p, map[string]string{"mode": "log"})
	if err != nil {
		t.Fatal(err)
	}
	// get_log_level answers trace (0 in the kits' numbering), so kits
	// that check it before logging keep their trace lines.
	if got := resp.Status.Int("level"); got != 0 {
		t.Errorf("get_log_level = %d, want 0 (trace)", got)
	}
	out := logs.String()
	for _, line := range []string{`level=DEBUG msg="plugin log" plugin=extismkit kind=Widget namespace=default name=w1 message="kit trace"`,
		`level=DEBUG msg="plugin log" plugin=extismkit kind=Widget namespace=default name=w1 message="kit debug"`,
		`level=INFO msg="plugin log" plugin=extismkit kind=Widget namespace=default name=w1 message="kit info"`,
		`level=WARN msg="plugin log" plugin=extismkit kind=Widget namespace=default name=w1 message="kit warn"`,
		`level=ERROR msg="plugin log" plugin=extismkit kind=Widget namespace=default name=w1 message="kit error"`} {
		if !strings.Contains(out, line) {
			t.Errorf("the plugin's log lacks %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, "Calling function") {
		t.Errorf("the SDK's own diagnostics reached the plugin's log:\n%s", out)
	}
}

// TestPanicTraceNormalised: two panics at the same place whose messages
// and stacks hold different pointers give the same error text, so they
// aggregate into one Event.
func TestPanicTraceNormalised(t *testing.T) {
	p := hosttest.Load(t, "faulty", host.Config{Limits: host.Limits{PoolSize: 1, CallTimeout: 10 * time.Second}})
	ctx := context.Background()
	var texts []string
	for range 3 {
		_, err := reconcileMode(ctx, p, map[string]string{"mode": "panicptr"})
		if !errors.Is(err, host.ErrGuestPanic) {
			t.Fatalf("err = %v, want %v", err, host.ErrGuestPanic)
		}
		texts = append(texts, err.Error())
	}
	t.Log(texts[0])
	if !strings.Contains(texts[0], "bad object at 0x?") {
		t.Fatalf("the pointer in the panic message was not replaced: %s", texts[0])
	}
	if texts[1] != texts[0] || texts[2] != texts[0] {
		t.Fatalf("repeated panics read differently:\n%s\n%s", texts[0], texts[1])
	}
	if regexp.MustCompile(`0x[0-9a-f]`).MatchString(texts[0]) {
		t.Fatalf("a hexadecimal value is left: %s", texts[0])
	}
}
