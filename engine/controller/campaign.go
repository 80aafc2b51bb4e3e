package controller

import (
	"context"
	"time"
)

// campaigns are the leadership campaigns of a Manager with Electors, one
// per wanted controller name. They belong to Run's goroutine.
type campaigns struct {
	m *Manager
	// ctx is the parent of every campaign: it carries the values of Run's
	// context but not its end, so that a lease outlives the controllers
	// stopping and is released only once they have.
	ctx    context.Context
	byName map[string]*campaign
	// ending are the campaigns cancelled whose goroutine may still run.
	ending []*campaign
}

// campaign is one name's campaign goroutine.
type campaign struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// retryLead is how long a campaign waits after its elector failed with an
// error of its own (not the end of the campaign).
const retryLead = time.Second

// sync starts a campaign for each wanted name without one, and ends those
// of names that are no longer wanted and whose controller has stopped.
func (cs *campaigns) sync(want map[string]*Controller, running map[string]*instance, stopping []*instance) {
	still := cs.ending[:0]
	for _, c := range cs.ending {
		if !isClosed(c.done) {
			still = append(still, c)
		}
	}
	cs.ending = still
	for n := range want {
		if cs.byName[n] == nil {
			cs.start(n)
		}
	}
	for n, c := range cs.byName {
		if _, ok := want[n]; ok {
			continue
		}
		if _, ok := running[n]; ok || stoppingNamed(stopping, n) {
			continue
		}
		c.cancel()
		cs.ending = append(cs.ending, c)
		delete(cs.byName, n)
	}
}

func stoppingNamed(stopping []*instance, name string) bool {
	for _, in := range stopping {
		if in.c.Name() == name {
			return true
		}
	}
	return false
}

// start starts the campaign of name: it asks the name's elector to lead,
// records the leadership in Manager.leading and wakes Run, until the
// campaign is cancelled.
func (cs *campaigns) start(name string) {
	m := cs.m
	ctx, cancel := context.WithCancel(cs.ctx)
	c := &campaign{cancel: cancel, done: make(chan struct{})}
	cs.byName[name] = c
	el := m.electors(name)
	go func() {
		defer close(c.done)
		for {
			lctx, err := el.Lead(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				m.log.Error("controller election failed", "controller", name, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(retryLead):
				}
				continue
			}
			m.log.Info("leading controller", "controller", name)
			m.mu.Lock()
			m.leading[name] = lctx
			m.mu.Unlock()
			m.poke()
			<-lctx.Done()
			m.mu.Lock()
			if m.leading[name] == lctx {
				delete(m.leading, name)
			}
			m.mu.Unlock()
			m.poke()
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("controller leadership lost", "controller", name, "cause", context.Cause(lctx))
		}
	}()
}

// stopAll ends every campaign and waits for their goroutines. Run calls it
// after the controllers stopped.
func (cs *campaigns) stopAll() {
	for n, c := range cs.byName {
		c.cancel()
		cs.ending = append(cs.ending, c)
		delete(cs.byName, n)
	}
	for _, c := range cs.ending {
		<-c.done
	}
	cs.ending = nil
}
