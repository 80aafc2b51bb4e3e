package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// pool holds the instances of one plugin version: at most Limits.PoolSize,
// created on demand, reused while sound, trimmed when idle. Its instances
// come from one runner at a time; upgrade replaces the runner (the
// interpreter's by the compiler's, see tier.go) without failing a call.
type pool struct {
	p     *Plugin
	slots chan struct{} // one token per instance that may be out
	// started counts the instances ever started.
	started atomic.Int64
	// startCtx is the context of the instance starts a call left behind
	// (getForCall); close cancels it (stopStarts) and waits for them
	// (starts).
	startCtx   context.Context
	stopStarts context.CancelFunc
	starts     sync.WaitGroup

	mu     sync.Mutex // guards the fields below
	r      runner     // makes new instances
	idle   []idleInstance
	timer  *time.Timer // armed while more than one instance is idle
	closed bool
	// first is the runner the version was loaded on while it serves
	// interpreted code, or still has instances out after upgrade; nil
	// otherwise, so that a compiled-only pool tracks nothing per call.
	first *firstTier
}

// firstTier tracks the instances of the runner a pool starts on when a
// faster one is on its way: those out in calls when upgrade replaces it are
// closed as they come back, and the runner closes after the last.
type firstTier struct {
	r       runner
	live    map[instance]struct{} // its instances, idle or out
	out     int                   // its instances out, and those being started
	retired bool                  // upgrade replaced it
}

type idleInstance struct {
	in    instance
	since time.Time
}

func newPool(p *Plugin, r runner) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{p: p, r: r, slots: make(chan struct{}, p.cfg.Limits.PoolSize), startCtx: ctx, stopStarts: cancel}
}

// startFirstTier marks the pool's runner as the first tier, to be replaced
// by upgrade.
func (pl *pool) startFirstTier() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.first = &firstTier{r: pl.r, live: make(map[instance]struct{})}
}

// get takes an idle instance, or starts one under ctx when below the cap,
// or waits.
func (pl *pool) get(ctx context.Context) (instance, error) { return pl.take(ctx, false) }

// getForCall is get for a call, whose deadline is its call timeout: an
// instance it starts runs under its own budget (initTimeout), which a
// module's initialization may need more of than a call's. The call waits
// for the start until its deadline; when that passes first, the call fails
// with a timeout that says so, and the instance goes on starting for the
// next calls.
func (pl *pool) getForCall(ctx context.Context) (instance, error) { return pl.take(ctx, true) }

func (pl *pool) take(ctx context.Context, forCall bool) (instance, error) {
	select {
	case pl.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, &failure{err: ErrTimeout, detail: "waiting for a free instance: " + ctx.Err().Error()}
	}
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		<-pl.slots
		return nil, &failure{err: ErrClosed, detail: "plugin version closed"}
	}
	ft := pl.first
	if n := len(pl.idle); n > 0 {
		in := pl.idle[n-1].in
		pl.idle = pl.idle[:n-1]
		if ft != nil && !ft.retired {
			ft.out++ // idle instances are of the current runner
		}
		pl.mu.Unlock()
		return in, nil
	}
	r := pl.r
	if ft != nil && ft.retired {
		ft = nil // the new instance is of the runner that replaced it
	}
	if ft != nil {
		ft.out++ // the runner stays open while its instance starts
	}
	pl.mu.Unlock()
	// Every instance reserves its memory cap from the server's budget
	// while it exists.
	mem, cap := pl.p.host.mem, pl.instanceCap()
	if !mem.reserve(cap) {
		pl.firstDone(ft)
		<-pl.slots
		return nil, &failure{err: ErrOverBudget, detail: fmt.Sprintf(
			"starting an instance would pass the server's guest memory budget of %d MiB (%d MiB reserved by live instances; --plugin-guest-memory)",
			mem.budget>>20, mem.reserved.Load()>>20)}
	}
	if forCall {
		return pl.startForCall(ctx, r, ft)
	}
	in, err := r.newInstance(ctx)
	return pl.startDone(ft, in, err)
}

// startDone does the accounting of a start that gave in or err; ft is the
// first tier the start counted in, nil when none. On failure the
// instance's memory, first-tier use and slot go back.
func (pl *pool) startDone(ft *firstTier, in instance, err error) (instance, error) {
	if err != nil {
		pl.p.host.mem.release(pl.instanceCap())
		pl.firstDone(ft)
		<-pl.slots
		return nil, err
	}
	if ft != nil {
		pl.mu.Lock()
		ft.live[in] = struct{}{}
		pl.mu.Unlock()
	}
	pl.started.Add(1)
	return in, nil
}

// startForCall starts an instance under the pool's own context, bounded by
// initTimeout, and waits for it until ctx, the call's, is done. An
// instance that starts after the call gave up goes idle in the pool; a
// start that fails then is logged, since no call is left to report it.
func (pl *pool) startForCall(ctx context.Context, r runner, ft *firstTier) (instance, error) {
	type result struct {
		in  instance
		err error
	}
	var (
		mu     sync.Mutex // orders the start's hand-over with the call's giving up
		gaveUp bool
		res    = make(chan result, 1)
	)
	pl.starts.Add(1)
	go func() {
		defer pl.starts.Done()
		in, err := r.newInstance(pl.startCtx)
		in, err = pl.startDone(ft, in, err)
		mu.Lock()
		defer mu.Unlock()
		if !gaveUp {
			res <- result{in, err}
			return
		}
		if err != nil {
			if pl.startCtx.Err() == nil {
				pl.p.log.Warn("starting an instance failed after the call that needed it gave up", "err", err.Error())
			}
			return
		}
		pl.put(in, false)
	}()
	select {
	case r := <-res:
		return r.in, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-res: // it ended as the call gave up: the pool keeps it
		if r.err == nil {
			pl.put(r.in, false)
		}
	default:
		gaveUp = true
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		l := pl.p.cfg.Limits
		return nil, &failure{err: ErrTimeout, detail: fmt.Sprintf(
			"the call's deadline (call timeout %v) passed while a new instance was starting (the module's initialization); the instance goes on starting, for up to %v, to serve the next calls",
			l.CallTimeout, initTimeout(l))}
	}
	return nil, &failure{err: context.Canceled, detail: "the caller canceled the call while a new instance was starting"}
}

// firstDone ends one use of the first tier's runner that did not give an
// instance, and closes the runner when it was the last after upgrade.
func (pl *pool) firstDone(ft *firstTier) {
	if ft == nil {
		return
	}
	pl.mu.Lock()
	ft.out--
	last := ft.retired && ft.out == 0
	if last && pl.first == ft {
		pl.first = nil
	}
	pl.mu.Unlock()
	if last {
		ft.r.close(context.Background())
	}
}

// instanceCap is the memory an instance of this pool may reach, in bytes.
func (pl *pool) instanceCap() int64 { return int64(pl.p.cfg.Limits.MemoryPages) << 16 }

// closeInstance closes an instance and gives its reservation back.
func (pl *pool) closeInstance(ctx context.Context, in instance) {
	in.close(ctx)
	pl.p.host.mem.release(pl.instanceCap())
}

// put returns an instance after a call, or discards it. An instance of a
// retired first tier is discarded, and its runner closed after the last.
func (pl *pool) put(in instance, discard bool) {
	pl.mu.Lock()
	var closeRunner runner
	if ft := pl.first; ft != nil {
		if _, ok := ft.live[in]; ok {
			ft.out--
			if ft.retired {
				discard = true
				if ft.out == 0 {
					closeRunner, pl.first = ft.r, nil
				}
			}
			if discard || pl.closed {
				delete(ft.live, in)
			}
		}
	}
	if discard || pl.closed {
		pl.mu.Unlock()
		pl.closeInstance(context.Background(), in)
		if closeRunner != nil {
			closeRunner.close(context.Background())
		}
		<-pl.slots
		return
	}
	pl.idle = append(pl.idle, idleInstance{in: in, since: time.Now()})
	if len(pl.idle) > 1 && pl.timer == nil {
		pl.timer = time.AfterFunc(pl.p.cfg.Limits.IdleTimeout, pl.trim)
	}
	pl.mu.Unlock()
	<-pl.slots
}

// upgrade makes r the runner of new instances: the idle instances of the
// first tier close now, those out in calls when they come back, and the
// first tier's runner after them. It reports false, changing nothing, when
// the pool is closed or has no first tier; the caller keeps r.
func (pl *pool) upgrade(r runner) bool {
	pl.mu.Lock()
	ft := pl.first
	if pl.closed || ft == nil || ft.retired {
		pl.mu.Unlock()
		return false
	}
	pl.r = r
	ft.retired = true
	idle := pl.idle
	pl.idle = nil
	if pl.timer != nil {
		pl.timer.Stop()
		pl.timer = nil
	}
	for _, it := range idle {
		delete(ft.live, it.in)
	}
	last := ft.out == 0
	if last {
		pl.first = nil
	}
	pl.mu.Unlock()
	ctx := context.Background()
	for _, it := range idle {
		pl.closeInstance(ctx, it.in)
	}
	if last {
		ft.r.close(ctx)
	}
	return true
}

// trim closes instances idle for longer than the idle timeout, keeping one
// warm.
func (pl *pool) trim() {
	pl.mu.Lock()
	pl.timer = nil
	if pl.closed {
		pl.mu.Unlock()
		return
	}
	cutoff := time.Now().Add(-pl.p.cfg.Limits.IdleTimeout)
	var stale []instance
	// idle is in put order: the oldest first. Keep the newest.
	keep := pl.idle[:0]
	for i, it := range pl.idle {
		if it.since.Before(cutoff) && i < len(pl.idle)-1 {
			stale = append(stale, it.in)
			if pl.first != nil {
				delete(pl.first.live, it.in)
			}
			continue
		}
		keep = append(keep, it)
	}
	clear(pl.idle[len(keep):])
	pl.idle = keep
	if len(pl.idle) > 1 {
		pl.timer = time.AfterFunc(pl.p.cfg.Limits.IdleTimeout, pl.trim)
	}
	pl.mu.Unlock()
	for _, in := range stale {
		pl.closeInstance(context.Background(), in)
	}
}

// prewarm starts instances until n are idle (at most the pool size).
func (pl *pool) prewarm(ctx context.Context, n int) error {
	n = min(n, cap(pl.slots))
	var held []instance
	defer func() {
		for _, in := range held {
			pl.put(in, false)
		}
	}()
	for len(held) < n {
		in, err := pl.get(ctx)
		if err != nil {
			return err
		}
		held = append(held, in)
	}
	return nil
}

// memory reports the linear memory of the idle instances.
func (pl *pool) memory() (total uint64, n int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, it := range pl.idle {
		total += it.in.memoryBytes()
	}
	return total, len(pl.idle)
}

// close closes the idle instances and the runners; calls must be over. The
// instance starts calls left behind are stopped and waited for first: one
// that ends now closes its instance (put on a closed pool).
func (pl *pool) close() {
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return
	}
	pl.closed = true
	pl.mu.Unlock()
	pl.stopStarts()
	pl.starts.Wait()
	pl.mu.Lock()
	if pl.timer != nil {
		pl.timer.Stop()
		pl.timer = nil
	}
	idle := pl.idle
	pl.idle = nil
	r, ft := pl.r, pl.first
	pl.first = nil
	pl.mu.Unlock()
	ctx := context.Background()
	for _, it := range idle {
		pl.closeInstance(ctx, it.in)
	}
	if ft != nil && ft.r != r {
		ft.r.close(ctx)
	}
	r.close(ctx)
}
