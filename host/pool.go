package host

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// pool holds the instances of one plugin version: at most Limits.PoolSize,
// created on demand, reused while sound, trimmed when idle.
type pool struct {
	p     *Plugin
	r     runner
	slots chan struct{} // one token per instance that may exist
	// started counts the instances ever started.
	started atomic.Int64

	mu     sync.Mutex // guards the fields below
	idle   []idleInstance
	timer  *time.Timer // armed while more than one instance is idle
	closed bool
}

type idleInstance struct {
	in    instance
	since time.Time
}

func newPool(p *Plugin, r runner) *pool {
	return &pool{p: p, r: r, slots: make(chan struct{}, p.cfg.Limits.PoolSize)}
}

// get takes an idle instance, or starts one when below the cap, or waits.
func (pl *pool) get(ctx context.Context) (instance, error) {
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
	if n := len(pl.idle); n > 0 {
		in := pl.idle[n-1].in
		pl.idle = pl.idle[:n-1]
		pl.mu.Unlock()
		return in, nil
	}
	pl.mu.Unlock()
	// Every instance reserves its memory cap from the server's budget
	// while it exists.
	mem, cap := pl.p.host.mem, pl.instanceCap()
	if !mem.reserve(cap) {
		<-pl.slots
		return nil, &failure{err: ErrOverBudget, detail: fmt.Sprintf(
			"starting an instance would pass the server's guest memory budget of %d MiB (%d MiB reserved by live instances; --plugin-guest-memory)",
			mem.budget>>20, mem.reserved.Load()>>20)}
	}
	in, err := pl.r.newInstance(ctx)
	if err != nil {
		mem.release(cap)
		<-pl.slots
		return nil, err
	}
	pl.started.Add(1)
	return in, nil
}

// instanceCap is the memory an instance of this pool may reach, in bytes.
func (pl *pool) instanceCap() int64 { return int64(pl.p.cfg.Limits.MemoryPages) << 16 }

// closeInstance closes an instance and gives its reservation back.
func (pl *pool) closeInstance(ctx context.Context, in instance) {
	in.close(ctx)
	pl.p.host.mem.release(pl.instanceCap())
}

// put returns an instance after a call, or discards it.
func (pl *pool) put(in instance, discard bool) {
	pl.mu.Lock()
	if discard || pl.closed {
		pl.mu.Unlock()
		pl.closeInstance(context.Background(), in)
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

// close closes the idle instances and the runner; calls must be over.
func (pl *pool) close() {
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return
	}
	pl.closed = true
	if pl.timer != nil {
		pl.timer.Stop()
		pl.timer = nil
	}
	idle := pl.idle
	pl.idle = nil
	pl.mu.Unlock()
	ctx := context.Background()
	for _, it := range idle {
		pl.closeInstance(ctx, it.in)
	}
	pl.r.close(ctx)
}
