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
	cancel context.CancelFunc
	done   chan struct{}
}

// Run runs the controllers while this replica leads, until ctx is done. It
// returns after every controller has stopped. Call it once at a time.
//
// Threads: Run's goroutine starts and stops the controllers; each runs in a
// goroutine of its own that Run waits for.
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
		m.sync(ctx, running)
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
		}
	}
}

// sync stops the running controllers that were removed or replaced, then
// starts the wanted ones that are not running.
func (m *Manager) sync(ctx context.Context, running map[string]*instance) {
	m.mu.Lock()
	want := make(map[string]*Controller, len(m.want))
	for n, c := range m.want {
		want[n] = c
	}
	m.mu.Unlock()
	var stopping []*instance
	for n, in := range running {
		if want[n] != in.c {
			in.cancel()
			stopping = append(stopping, in)
			delete(running, n)
			if _, still := want[n]; !still {
				m.metrics.Delete(n)
			}
		}
	}
	for _, in := range stopping {
		<-in.done
		m.log.Info("controller stopped", "controller", in.c.Name())
	}
	for n, c := range want {
		if _, ok := running[n]; ok {
			continue
		}
		cctx, cancel := context.WithCancel(ctx)
		in := &instance{c: c, cancel: cancel, done: make(chan struct{})}
		running[n] = in
		go func() {
			defer close(in.done)
			if err := c.Run(cctx); err != nil {
				m.log.Error("controller failed", "controller", n, "err", err)
			}
		}()
	}
}
