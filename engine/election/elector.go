package election

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/engine/controller"
)

// Leases makes the electors of one replica, one per name, each over its own
// Lease. Its zero value is not usable; call New.
type Leases struct {
	opts Options
	met  *metrics
	// wg counts the leadership goroutines of every elector (see Wait).
	wg sync.WaitGroup
	// mu guards electors, the elector of each name.
	mu       sync.Mutex
	electors map[string]*Elector
}

// New returns the Leases of the replica opts.Identity.
func New(opts Options) (*Leases, error) {
	if opts.Client == nil || opts.Identity == "" {
		return nil, errors.New("election: Options.Client and Identity are required")
	}
	met, err := newMetrics(opts.Registerer, opts.Identity)
	if err != nil {
		return nil, err
	}
	return &Leases{opts: opts.withDefaults(), met: met, electors: map[string]*Elector{}}, nil
}

// Identity is this replica's holderIdentity.
func (l *Leases) Identity() string { return l.opts.Identity }

// Elector returns the elector over the Lease Prefix+name in Namespace, the
// same one for the same name: the replica has one identity, so two electors
// of one lease could not tell which of them holds it.
func (l *Leases) Elector(name string) *Elector {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.electors[name]; e != nil {
		return e
	}
	e := &Elector{l: l, name: l.opts.Prefix + name, log: l.opts.Logger.With("lease", l.opts.Prefix+name), turn: make(chan struct{}, 1)}
	l.electors[name] = e
	return e
}

// Electors adapts Elector to controller.ManagerOptions.Electors.
func (l *Leases) Electors(name string) controller.Elector { return l.Elector(name) }

// Wait returns once every leadership goroutine the electors started has
// ended: each ends when its Lead context's parent is done (after releasing
// the lease) or leadership is lost.
func (l *Leases) Wait() { l.wg.Wait() }

// Elector leads while it holds its Lease. It implements controller.Elector.
type Elector struct {
	l    *Leases
	name string
	log  *slog.Logger

	// turn serializes Lead: a Lead holds its one token.
	turn chan struct{}
	// prev is closed when the leadership goroutine of the last Lead has
	// ended; nil before the first.
	prev chan struct{}
	// rec is what this elector last read or wrote of its Lease. It is
	// owned by Lead until it returns, then by the leadership goroutine
	// until it ends (prev).
	rec record
}

var _ controller.Elector = (*Elector)(nil)

// Name is the name of the elector's Lease.
func (e *Elector) Name() string { return e.name }

// Lead blocks until this replica holds the lease, trying every RetryPeriod
// (with jitter), and returns a context that is done when it stops leading:
// when ctx is done, or when the lease was not renewed within RenewDeadline
// of the start of the last successful renewal (context.Cause is then
// ErrLost). When ctx is done while it leads, the lease is released, so that
// another replica takes over at once; release ctx only after the work the
// lease guards has stopped. Lead returns ctx's error when ctx is done before
// this replica leads. Leads of one elector take turns, and each first waits
// for the leadership goroutine of the previous one to end (its release
// included).
func (e *Elector) Lead(ctx context.Context) (context.Context, error) {
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-e.turn }()
	if e.prev != nil {
		select {
		case <-e.prev:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	o := e.l.opts
	var start time.Time
	for {
		start = time.Now()
		actx, cancel := context.WithTimeout(ctx, o.RenewDeadline)
		ok := e.tryAcquireOrRenew(actx)
		cancel()
		if ok {
			break
		}
		wait := o.RetryPeriod + time.Duration(rand.Float64()*jitterFactor*float64(o.RetryPeriod))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		e.release()
		return nil, err
	}
	e.log.Info("acquired lease", "identity", o.Identity)
	e.l.met.set(e.name, true)
	lctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	e.prev = done
	e.l.wg.Add(1)
	go func() {
		defer e.l.wg.Done()
		defer close(done)
		defer e.l.met.set(e.name, false)
		e.keep(lctx, cancel, start)
	}()
	return lctx, nil
}

// jitterFactor spreads the candidates' retries, as client-go's does.
const jitterFactor = 1.2

// keep renews the lease every RetryPeriod while lctx lasts. A watchdog, not
// the renewal calls, ends leadership at RenewDeadline after the start of the
// last renewal that succeeded, so that a write stalled in the store cannot
// hold it up. When ctx is done it releases the lease.
func (e *Elector) keep(lctx context.Context, cancel context.CancelCauseFunc, renewed time.Time) {
	o := e.l.opts
	watchdog := time.AfterFunc(time.Until(renewed.Add(o.RenewDeadline)), func() { cancel(ErrLost) })
	defer watchdog.Stop()
	tick := time.NewTicker(o.RetryPeriod)
	defer tick.Stop()
	for {
		select {
		case <-lctx.Done():
			if context.Cause(lctx) == ErrLost {
				e.log.Warn("lost lease: not renewed in time", "renew_deadline", o.RenewDeadline)
				return
			}
			e.release()
			e.log.Info("released lease")
			return
		case <-tick.C:
		}
		start := time.Now()
		actx, acancel := context.WithDeadline(lctx, renewed.Add(o.RenewDeadline))
		ok := e.tryAcquireOrRenew(actx)
		acancel()
		if !ok {
			continue
		}
		if !watchdog.Stop() {
			continue // leadership already ended; lctx is done
		}
		renewed = start
		watchdog.Reset(time.Until(renewed.Add(o.RenewDeadline)))
	}
}

// release gives up the lease when this replica holds it, within
// RenewDeadline.
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), e.l.opts.RenewDeadline)
	defer cancel()
	if err := e.tryRelease(ctx); err != nil {
		e.log.Warn("release lease", "err", err)
	}
}
