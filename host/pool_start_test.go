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

// slowInit is how long the slowinit guest's initialization takes
// (host/testdata/guests/slowinit).
const slowInit = 500 * time.Millisecond

// A call that needs a new instance of a module whose initialization takes
// longer than the call's deadline: the call fails at its deadline with a
// timeout that says an instance was starting, the instance goes on
// starting under its own budget and serves the next call, and closing the
// version meanwhile stops and waits for such a start.
func TestCallStartsInstanceUnderItsOwnBudget(t *testing.T) {
	const callTimeout = 100 * time.Millisecond
	h := hosttest.NewHost(t, host.Options{})
	cfg := host.Config{Limits: host.Limits{CallTimeout: callTimeout, PoolSize: 2}}
	ctx := context.Background()
	req := &abi.AdmissionRequest{Operation: abi.Create, Object: abi.RawJSON(`{}`)}

	t.Run("the start goes on for the next call", func(t *testing.T) {
		p := hosttest.LoadWith(t, h, "slowinit", cfg)
		release := host.HoldInstance(t, p) // the load's instance is busy
		defer release()
		began := time.Now()
		_, err := p.Admit(ctx, req)
		took := time.Since(began)
		var ce *host.CallError
		if !errors.As(err, &ce) || !errors.Is(err, host.ErrTimeout) || !strings.Contains(ce.Detail, "while a new instance was starting") {
			t.Fatalf("Admit = %v, want a timeout saying a new instance was starting", err)
		}
		if took >= slowInit {
			t.Errorf("the call took %v, past its deadline of %v: it waited for the start", took, callTimeout)
		}
		// The start finishes on its own and leaves the instance idle.
		for deadline := time.Now().Add(20 * time.Second); p.Stats().IdleInstances != 1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no instance went idle after the call gave up: %+v", p.Stats())
			}
		}
		if _, err := p.Admit(ctx, req); err != nil {
			t.Fatalf("the next call: %v", err)
		}
		if n := p.Stats().InstancesStarted; n != 2 {
			t.Errorf("%d instances started, want 2: the next call was served by the one left starting", n)
		}
	})

	t.Run("closing stops a start left behind", func(t *testing.T) {
		p := hosttest.LoadWith(t, h, "slowinit", cfg)
		release := host.HoldInstance(t, p)
		if _, err := p.Admit(ctx, req); !errors.Is(err, host.ErrTimeout) {
			t.Fatalf("Admit = %v, want a timeout", err)
		}
		release()
		closed := make(chan struct{})
		go func() {
			p.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(20 * time.Second):
			t.Fatal("Close did not return while an instance was starting")
		}
		if s := p.Stats(); s.IdleInstances != 0 {
			t.Errorf("idle instances after Close: %+v", s)
		}
	})
}
