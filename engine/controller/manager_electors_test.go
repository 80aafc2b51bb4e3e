package controller_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// grantElector leads when the test grants it, until the test takes the
// leadership away; it records when its campaign (Lead's context) ended.
type grantElector struct {
	grants chan struct{}
	mu     sync.Mutex
	lose   context.CancelCauseFunc
	ended  time.Time
	// campaign is the context of the last Lead.
	campaign context.Context
}

var errTaken = errors.New("test: leadership taken away")

func (e *grantElector) Lead(ctx context.Context) (context.Context, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-e.grants:
	}
	lctx, cancel := context.WithCancelCause(ctx)
	e.mu.Lock()
	e.lose = cancel
	e.campaign = ctx
	e.mu.Unlock()
	context.AfterFunc(ctx, func() {
		e.mu.Lock()
		e.ended = time.Now()
		e.mu.Unlock()
	})
	return lctx, nil
}

func (e *grantElector) take() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lose(errTaken)
}

func (e *grantElector) campaignDone() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.campaign != nil && e.campaign.Err() != nil
}

func (e *grantElector) endedAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ended
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestManagerElectorsPerController: with Electors, each controller runs
// only while its own elector leads; losing its leadership stops it (and
// only it) until it leads again; a removed controller's campaign ends only
// after the controller has stopped, so that a lease is released after the
// work it guards.
func TestManagerElectorsPerController(t *testing.T) {
	svc := newEngine(t)
	var mu sync.Mutex
	electors := map[string]*grantElector{}
	elector := func(name string) *grantElector {
		mu.Lock()
		defer mu.Unlock()
		if electors[name] == nil {
			electors[name] = &grantElector{grants: make(chan struct{}, 1)}
		}
		return electors[name]
	}
	entered := make(chan struct{}, 1)
	var exited time.Time
	var exitMu sync.Mutex
	a := newController(t, svc, "a", controller.ReconcilerFunc(func(ctx context.Context, _ *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond) // a slow stop
		exitMu.Lock()
		exited = time.Now()
		exitMu.Unlock()
		return nil, ctx.Err()
	}), nil)
	b := newController(t, svc, "b", controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
		return &abi.ReconcileResponse{}, nil
	}), func(o *controller.Options) { o.For, o.Owns = gizmoKind, nil })

	m := controller.NewManager(controller.ManagerOptions{
		Logger:   quietLogger(),
		Electors: func(name string) controller.Elector { return elector(name) },
	})
	m.Put(a)
	m.Put(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()

	time.Sleep(100 * time.Millisecond)
	if isClosed(m.Started(a)) || isClosed(m.Started(b)) || len(m.Leading()) > 0 {
		t.Fatalf("controllers started without leading: leading %v", m.Leading())
	}

	elector("a").grants <- struct{}{}
	testsupport.Eventually(t, 5*time.Second, "a starts once it leads", func() bool { return isClosed(m.Started(a)) })
	if isClosed(m.Started(b)) {
		t.Error("b started while only a leads")
	}
	if got := m.Leading(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Leading() = %v, want [a]", got)
	}

	elector("a").take()
	testsupport.Eventually(t, 5*time.Second, "a stops once its leadership is lost", func() bool {
		return !isClosed(m.Started(a)) && len(m.Leading()) == 0
	})
	elector("b").grants <- struct{}{}
	elector("a").grants <- struct{}{}
	testsupport.Eventually(t, 5*time.Second, "a and b run once they lead", func() bool {
		return isClosed(m.Started(a)) && isClosed(m.Started(b))
	})

	create(t, svc, widgets, newWidget("w", "small"))
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("a never reconciled")
	}
	m.Remove("a")
	testsupport.Eventually(t, 5*time.Second, "a's campaign ends", func() bool { return !elector("a").endedAt().IsZero() })
	exitMu.Lock()
	stopped := exited
	exitMu.Unlock()
	if stopped.IsZero() || elector("a").endedAt().Before(stopped) {
		t.Errorf("a's campaign ended at %v, before its reconcile stopped at %v", elector("a").endedAt(), stopped)
	}
	if elector("b").campaignDone() {
		t.Error("b's campaign ended although b is still wanted")
	}
	if got := m.Leading(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("Leading() = %v, want [b]", got)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if !elector("b").campaignDone() {
		t.Error("Run returned without ending b's campaign")
	}
}
