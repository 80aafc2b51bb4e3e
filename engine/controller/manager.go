package controller

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// DefaultStopTimeout is how long a Manager whose context is done waits for
// its controllers to stop before it abandons those still running.
const DefaultStopTimeout = 10 * time.Second

// ManagerOptions configures a Manager. Zero values get defaults.
type ManagerOptions struct {
	// Elector decides when this replica runs controllers. Default
	// SingleReplica.
	Elector Elector
	// Electors, when set, gives each controller an elector of its own, by
	// controller name: while Elector leads, a controller runs only while
	// its own elector leads too, so that the controllers spread over the
	// replicas. Its leadership outlives a controller replaced by Put under
	// the same name; the manager ends it once a removed controller has
	// stopped. Default none: every controller runs while Elector leads.
	Electors func(name string) Elector
	// Metrics, when set, loses the series of removed controllers.
	Metrics *Metrics
	// Logger receives the manager's logs. Default slog.Default().
	Logger *slog.Logger
	// StopTimeout bounds how long Run waits, once its context is done,
	// for controllers to stop: a worker stuck in a plugin call that
	// ignores cancellation is abandoned (logged) rather than waited for.
	// Default DefaultStopTimeout.
	StopTimeout time.Duration
}

// Manager runs a changing set of controllers: plugins are installed, swapped
// and removed while the server runs. Put and Remove may be called before or
// during Run, from any goroutine.
//
// A controller that is stopping never holds up the others: only its
// successor (the controller Put under its name) and controllers of the same
// resource wait until it has stopped, so that one kind is never reconciled
// by two controllers at once; every other controller starts at once.
type Manager struct {
	elector     Elector
	electors    func(name string) Elector
	metrics     *Metrics
	log         *slog.Logger
	stopTimeout time.Duration
	changed     chan struct{} // cap 1: wakes Run after Put or Remove

	// mu guards want, started, waiting, leading and leads.
	mu   sync.Mutex
	want map[string]*Controller
	// started has, for each wanted controller, a channel closed once it
	// runs (in the current leadership).
	started map[*Controller]chan struct{}
	// waiting names, for each wanted controller that cannot start yet, the
	// stopping controller it waits for.
	waiting map[string]string
	// leading has, with Electors, the leadership context of each
	// controller name this replica leads.
	leading map[string]context.Context
	// leads is set while Elector leads.
	leads bool
}

// NewManager returns a Manager with no controllers.
func NewManager(opts ManagerOptions) *Manager {
	if opts.Elector == nil {
		opts.Elector = SingleReplica{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	return &Manager{
		elector:     opts.Elector,
		electors:    opts.Electors,
		metrics:     opts.Metrics,
		log:         opts.Logger,
		stopTimeout: opts.StopTimeout,
		changed:     make(chan struct{}, 1),
		want:        make(map[string]*Controller),
		started:     make(map[*Controller]chan struct{}),
		waiting:     make(map[string]string),
		leading:     make(map[string]context.Context),
	}
}

// Put adds c, or replaces the controller of the same name: a running
// predecessor is stopped, and its workers have finished, before c starts.
func (m *Manager) Put(c *Controller) {
	m.mu.Lock()
	if old := m.want[c.Name()]; old != nil && old != c {
		delete(m.started, old)
	}
	m.want[c.Name()] = c
	if m.started[c] == nil {
		m.started[c] = make(chan struct{})
	}
	m.mu.Unlock()
	m.poke()
}

// Remove stops and forgets the controller called name, if any. It does not
// wait for it to stop.
func (m *Manager) Remove(name string) {
	m.mu.Lock()
	c, ok := m.want[name]
	delete(m.want, name)
	delete(m.started, c)
	m.mu.Unlock()
	if ok {
		m.poke()
	}
}

// Started returns a channel that is closed once c runs: the manager leads
// and started it. It is nil when c is not wanted (never Put, replaced or
// removed).
func (m *Manager) Started(c *Controller) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started[c]
}

// WaitsFor returns the name of the stopping controller that the wanted
// controller name waits for before it starts, or "".
func (m *Manager) WaitsFor(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waiting[name]
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

// Leading returns the names of the wanted controllers this replica leads,
// sorted: with Electors, those whose own elector leads; without, all of them
// while Elector leads.
func (m *Manager) Leading() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	if !m.leads {
		return out
	}
	for n := range m.want {
		if _, ok := m.leading[n]; ok || m.electors == nil {
			out = append(out, n)
		}
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
	c *Controller
	r *run
	// lead is the leadership it runs under, with Electors.
	lead   context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// held are the caches a stopping instance keeps for its successor.
	held []*sharedInformer
}

// Run runs the controllers while this replica leads, until ctx is done. It
// returns after every controller has stopped, or after StopTimeout, when it
// abandons the controllers still stuck (a worker in a plugin call that does
// not end). Call it once at a time.
//
// The controllers share their caches: one informer per resource and
// namespace, started by the first controller that needs it and stopped when
// the last one stops. A controller replaced by Put finds the caches of its
// predecessor's kinds as they were, without listing again.
//
// Threads: Run's goroutine starts and stops the controllers; each runs in a
// goroutine of its own that Run waits for (up to StopTimeout at the end),
// and each shared cache in a goroutine that its last controller stops and
// waits for. A stopping controller has a goroutine that wakes Run once it
// has stopped, so that what waited for it can start. With Electors, each
// wanted controller name has a campaign goroutine that asks its elector to
// lead and wakes Run when leadership starts and ends; Run ends a campaign
// once its controller is removed and has stopped, so that a lease is
// released only after the work it guards stopped, and waits for every
// campaign before it returns.
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
		m.setLeads(true)
		m.lead(leadCtx)
		m.setLeads(false)
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
	var stopping []*instance
	camps := &campaigns{m: m, ctx: context.WithoutCancel(ctx), byName: make(map[string]*campaign)}
	defer func() {
		for _, in := range running {
			in.cancel()
			stopping = append(stopping, in)
		}
		m.mu.Lock()
		for c := range m.started {
			m.started[c] = make(chan struct{}) // not running any more
		}
		m.waiting = map[string]string{}
		m.mu.Unlock()
		m.awaitStopped(stopping)
		camps.stopAll()
	}()
	for {
		stopping = m.sync(ctx, informers, running, stopping, camps)
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
		}
	}
}

// awaitStopped waits up to StopTimeout for the instances to stop, and logs
// those it abandons.
func (m *Manager) awaitStopped(instances []*instance) {
	timeout := time.NewTimer(m.stopTimeout)
	defer timeout.Stop()
	for i, in := range instances {
		select {
		case <-in.done:
		case <-timeout.C:
			var names []string
			for _, left := range instances[i:] {
				select {
				case <-left.done:
				default:
					names = append(names, left.c.Name())
				}
			}
			m.log.Warn("controllers did not stop in time; abandoning them (a worker is stuck in a plugin call)",
				"controllers", names, "timeout", m.stopTimeout)
			return
		}
	}
}

// sync stops the running controllers that were removed or replaced, reaps
// those of the stopping ones that have stopped, then starts the wanted ones
// that are not running, except those that wait for a stopping controller
// (their predecessor, or one of the same resource). It returns the
// controllers still stopping. The caches of a stopped controller are held
// until this sync has started the new ones, so that a replacement reuses
// them.
func (m *Manager) sync(ctx context.Context, informers *sharedInformers, running map[string]*instance, stopping []*instance, camps *campaigns) []*instance {
	m.mu.Lock()
	want := maps.Clone(m.want)
	leading := maps.Clone(m.leading)
	m.mu.Unlock()
	for n, in := range running {
		lost := m.electors != nil && leading[n] != in.lead
		if lost && want[n] == in.c {
			m.mu.Lock()
			if ch := m.started[in.c]; ch != nil && isClosed(ch) {
				m.started[in.c] = make(chan struct{}) // not running any more
			}
			m.mu.Unlock()
		}
		if want[n] != in.c || lost {
			in.held = informers.hold(in.c)
			in.cancel()
			stopping = append(stopping, in)
			delete(running, n)
			if _, still := want[n]; !still {
				m.metrics.Delete(n)
			}
			go func() {
				<-in.done
				m.poke()
			}()
		}
	}
	var held []*sharedInformer
	defer func() { informers.releaseAll(held) }()
	// A successor of the same kind inherits the writes its predecessor made
	// that the shared cache has not shown yet: it compares with that cache,
	// where a run of its own would have listed afresh.
	inherit := make(map[string]*ownWrites)
	still := stopping[:0]
	for _, in := range stopping {
		select {
		case <-in.done:
			m.log.Info("controller stopped", "controller", in.c.Name())
			held = append(held, in.held...)
			if next := want[in.c.Name()]; next != nil && sameCache(in.c, next) {
				inherit[in.c.Name()] = in.r.own
			}
		default:
			still = append(still, in)
		}
	}
	stopping = still
	waiting := make(map[string]string)
	for n, c := range want {
		if _, ok := running[n]; ok {
			continue
		}
		base := ctx
		if m.electors != nil {
			lctx := leading[n]
			if lctx == nil || lctx.Err() != nil {
				continue // another replica runs it
			}
			base = lctx
		}
		if b := blocker(stopping, c); b != nil {
			waiting[n] = b.c.Name()
			m.log.Info("controller waits for a stopping one", "controller", n, "waits_for", b.c.Name())
			continue
		}
		cctx, cancel := context.WithCancel(c.withUser(base))
		in := &instance{c: c, lead: leading[n], cancel: cancel, done: make(chan struct{})}
		running[n] = in
		r := c.start(cctx, informers, inherit[n])
		in.r = r
		go func() {
			defer close(in.done)
			if err := c.runStarted(cctx, r); err != nil {
				m.log.Error("controller failed", "controller", n, "err", err)
			}
		}()
		m.mu.Lock()
		if ch := m.started[c]; ch != nil {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.waiting = waiting
	m.mu.Unlock()
	if m.electors != nil {
		camps.sync(want, running, stopping)
	}
	return stopping
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (m *Manager) setLeads(leads bool) {
	m.mu.Lock()
	m.leads = leads
	m.mu.Unlock()
}

// blocker is the stopping instance c must wait for: its predecessor, or a
// controller of the same resource, which would fight c over the children
// of the same objects. nil when c may start.
func blocker(stopping []*instance, c *Controller) *instance {
	for _, in := range stopping {
		if in.c.Name() == c.Name() || in.c.opts.For.Resource.GroupResource() == c.opts.For.Resource.GroupResource() {
			return in
		}
	}
	return nil
}

// sameCache reports whether a and b reconcile from the same cache.
func sameCache(a, b *Controller) bool {
	return a.opts.For.Resource == b.opts.For.Resource && a.opts.Namespace == b.opts.Namespace &&
		shareable(a.opts.Client) && shareable(b.opts.Client) && a.opts.Client == b.opts.Client
}
