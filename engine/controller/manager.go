package controller

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// ManagerOptions configures a Manager. Zero values get defaults.
type ManagerOptions struct {
	// Elector decides when this replica runs controllers. Default
	// SingleReplica.
	Elector Elector
	// Metrics, when set, loses the series of removed controllers.
	Metrics *Metrics
	// Logger receives the manager's logs. Default slog.Default().
	Logger *slog.Logger
}

// Manager runs a changing set of controllers: plugins are installed, swapped
// and removed while the server runs. Put and Remove may be called before or
// during Run, from any goroutine.
type Manager struct {
	elector Elector
	metrics *Metrics
	log     *slog.Logger
	changed chan struct{} // cap 1: wakes Run after Put or Remove

	// mu guards want.
	mu   sync.Mutex
	want map[string]*Controller
}

// NewManager returns a Manager with no controllers.
func NewManager(opts ManagerOptions) *Manager {
	if opts.Elector == nil {
		opts.Elector = SingleReplica{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Manager{
		elector: opts.Elector,
		metrics: opts.Metrics,
		log:     opts.Logger,
		changed: make(chan struct{}, 1),
		want:    make(map[string]*Controller),
	}
}

// Put adds c, or replaces the controller of the same name: a running
// predecessor is stopped, and its workers have finished, before c starts.
func (m *Manager) Put(c *Controller) {
	m.mu.Lock()
	m.want[c.Name()] = c
	m.mu.Unlock()
	m.poke()
}

// Remove stops and forgets the controller called name, if any. It does not
// wait for it to stop.
func (m *Manager) Remove(name string) {
	m.mu.Lock()
	_, ok := m.want[name]
	delete(m.want, name)
	m.mu.Unlock()
	if ok {
		m.poke()
	}
}

// Names returns the names of the controllers the manager runs, sorted.
func (m *Manager) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.want))
	for n := range m.want {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (m *Manager) poke() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// instance is one running controller.
type instance struct {
	c      *Controller
	r      *run
	cancel context.CancelFunc
	done   chan struct{}
}

// Run runs the controllers while this replica leads, until ctx is done. It
// returns after every controller has stopped. Call it once at a time.
//
// The controllers share their caches: one informer per resource and
// namespace, started by the first controller that needs it and stopped when
// the last one stops. A controller replaced by Put finds the caches of its
// predecessor's kinds as they were, without listing again.
//
// Threads: Run's goroutine starts and stops the controllers; each runs in a
// goroutine of its own that Run waits for, and each shared cache in a
// goroutine that its last controller stops and waits for.
func (m *Manager) Run(ctx context.Context) error {
	for {
		leadCtx, err := m.elector.Lead(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		m.log.Info("leading: starting controllers")
		m.lead(leadCtx)
		if ctx.Err() != nil {
			return nil
		}
		m.log.Warn("leadership lost: controllers stopped")
	}
}

// lead runs the wanted controllers until ctx is done, then stops them all.
func (m *Manager) lead(ctx context.Context) {
	informers := newSharedInformers(m.log)
	running := make(map[string]*instance)
	defer func() {
		for _, in := range running {
			in.cancel()
		}
		for _, in := range running {
			<-in.done
		}
	}()
	for {
		m.sync(ctx, informers, running)
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
		}
	}
}

// sync stops the running controllers that were removed or replaced, then
// starts the wanted ones that are not running. The caches of the stopped
// controllers are held until the new ones have taken theirs, so that a
// replacement reuses them.
func (m *Manager) sync(ctx context.Context, informers *sharedInformers, running map[string]*instance) {
	m.mu.Lock()
	want := make(map[string]*Controller, len(m.want))
	for n, c := range m.want {
		want[n] = c
	}
	m.mu.Unlock()
	var stopping []*instance
	var held []*sharedInformer
	defer func() { informers.releaseAll(held) }()
	for n, in := range running {
		if want[n] != in.c {
			held = append(held, informers.hold(in.c)...)
			in.cancel()
			stopping = append(stopping, in)
			delete(running, n)
			if _, still := want[n]; !still {
				m.metrics.Delete(n)
			}
		}
	}
	// A successor of the same kind inherits the writes its predecessor made
	// that the shared cache has not shown yet: it compares with that cache,
	// where a run of its own would have listed afresh.
	inherit := make(map[string]*ownWrites)
	for _, in := range stopping {
		<-in.done
		m.log.Info("controller stopped", "controller", in.c.Name())
		if next := want[in.c.Name()]; next != nil && sameCache(in.c, next) {
			inherit[in.c.Name()] = in.r.own
		}
	}
	for n, c := range want {
		if _, ok := running[n]; ok {
			continue
		}
		cctx, cancel := context.WithCancel(ctx)
		in := &instance{c: c, cancel: cancel, done: make(chan struct{})}
		running[n] = in
		r := c.start(cctx, informers, inherit[n])
		in.r = r
		go func() {
			defer close(in.done)
			if err := c.runStarted(cctx, r); err != nil {
				m.log.Error("controller failed", "controller", n, "err", err)
			}
		}()
	}
}

// sameCache reports whether a and b reconcile from the same cache.
func sameCache(a, b *Controller) bool {
	return a.opts.For.Resource == b.opts.For.Resource && a.opts.Namespace == b.opts.Namespace &&
		shareable(a.opts.Client) && shareable(b.opts.Client) && a.opts.Client == b.opts.Client
}
