package serving

import (
	"context"
	"sync"
)

// Detached tracks the long-running requests whose connection outlives
// their handler: a WebSocket watch hands its upgraded connection to
// goroutines of its own and returns (see Detach), so that the HTTP server
// lets go of the request's goroutine, its stack and its buffers, which are
// most of what an idle watcher costs. Such a request still counts where it
// did until its connection ends: its watch slot (Limit), the in-flight
// gauge, the request metrics and log line (Instrument), its audit
// ResponseComplete event (Auditor). Shutdown ends them, as the HTTP
// server's Shutdown ends the requests it still tracks. The zero value is
// ready to use; it must not be copied after first use.
type Detached struct {
	mu      sync.Mutex // guards the fields below
	open    map[*lifetime]struct{}
	closing bool
	idle    chan struct{} // closed when the last one ends after Shutdown began; nil before
}

// Open returns the number of detached requests whose connection has not
// ended.
func (d *Detached) Open() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.open)
}

// Shutdown ends every detached connection (its context is canceled: a
// WebSocket watch sends its close frame, 1001) and refuses to detach
// requests from then on (their handlers serve them to the end, as without
// Detached). It returns once every connection has ended, or with ctx's
// error when ctx ends first.
func (d *Detached) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	d.closing = true
	for lt := range d.open {
		lt.cancel()
	}
	if len(d.open) == 0 {
		d.mu.Unlock()
		return nil
	}
	if d.idle == nil {
		d.idle = make(chan struct{})
	}
	idle := d.idle
	d.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add registers lt, unless Shutdown has begun.
func (d *Detached) add(lt *lifetime) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return false
	}
	if d.open == nil {
		d.open = make(map[*lifetime]struct{})
	}
	d.open[lt] = struct{}{}
	return true
}

func (d *Detached) remove(lt *lifetime) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.open, lt)
	if len(d.open) == 0 && d.idle != nil {
		select {
		case <-d.idle:
		default:
			close(d.idle)
		}
	}
}

type lifetimeKey struct{}

// lifetime is one long-running request's, which Instrument puts in its
// context when the server has a Detached: it collects the work the
// serving layers do when the request ends (afterRequest), and runs it
// when the handler returns, or, once the handler detached the connection,
// when the connection ends.
type lifetime struct {
	d *Detached

	mu       sync.Mutex // guards the fields below
	detached bool
	ended    bool
	after    []func() // run by end, in order
	cancel   func()   // ends the connection's context, once detached
}

// withLifetime returns ctx with a lifetime of d's.
func withLifetime(ctx context.Context, d *Detached) context.Context {
	return context.WithValue(ctx, lifetimeKey{}, &lifetime{d: d})
}

// Detach lets the connection of the long-running request whose context is
// ctx outlive its handler. It returns the context the connection must use
// from then on (the request's values; done when Detached.Shutdown runs),
// in place of the request's, which the HTTP server cancels when the
// handler returns, and end, which the connection must call once, when it
// has ended and everything it started has stopped. Until then the request
// holds its watch slot and counts as in flight, and its log line, metrics
// and audit completion wait. ok is false where the request cannot be
// detached (the server has no Detached, the request is not long-running,
// or shutdown has begun): the handler must then serve the connection to
// its end before it returns, as usual. Calling end before the handler
// returns (the upgrade failed after all) is allowed: the request then
// ends with its handler.
func Detach(ctx context.Context) (_ context.Context, end func(), ok bool) {
	lt, _ := ctx.Value(lifetimeKey{}).(*lifetime)
	if lt == nil {
		return nil, nil, false
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.detached || lt.ended {
		return nil, nil, false
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lt.cancel = cancel
	if !lt.d.add(lt) {
		cancel()
		return nil, nil, false
	}
	lt.detached = true
	return cctx, lt.end, true
}

// afterRequest runs f when the request whose context is ctx ends: now,
// unless its connection is detached and has not ended yet, in which case
// when it does. The serving layers call it where they would run f as the
// handler returns.
func afterRequest(ctx context.Context, f func()) {
	if lt, _ := ctx.Value(lifetimeKey{}).(*lifetime); lt == nil || !lt.later(f) {
		f()
	}
}

// later keeps f for end and returns true when the connection is detached
// and has not ended; else it returns false and the caller runs f itself.
func (lt *lifetime) later(f func()) bool {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.detached && !lt.ended {
		lt.after = append(lt.after, f)
		return true
	}
	return false
}

// end runs the work the serving layers left for the end of the request,
// once, cancels the connection's context and stops counting it.
func (lt *lifetime) end() {
	lt.mu.Lock()
	if lt.ended {
		lt.mu.Unlock()
		return
	}
	lt.ended = true
	after := lt.after
	lt.after = nil
	lt.mu.Unlock()
	for _, f := range after {
		f()
	}
	lt.cancel()
	lt.d.remove(lt)
}
