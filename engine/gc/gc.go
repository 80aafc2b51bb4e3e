package gc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/workqueue"
	"github.com/setpoint-dev/setpoint/store"
)

// maxRounds bounds the cascade of sweeps one safety-net pass runs.
const maxRounds = 20

// FieldManager names the collector's writes (owner references and
// finalizers it removes, a CRD's Terminating condition, a namespace's
// conditions) in managedFields.
const FieldManager = "setpoint-garbage-collector"

// maxConflictRetries bounds the attempts of one read-modify-write that
// conflicts with other writers.
const maxConflictRetries = 64

// Options configure a Collector. Zero values get the defaults New states.
type Options struct {
	// Store is the store the Service serves from: the collector lists and
	// watches it, and writes only through the Service. Required.
	Store store.Store
	// Logger receives the collector's logs; slog.Default() when nil.
	Logger *slog.Logger
	// SweepInterval is the period of the full sweep over every stored
	// object, the safety net of the incremental work; 10 minutes by default.
	SweepInterval time.Duration
	// EventTTL is how long Events are kept after their last update; one
	// hour by default, as in Kubernetes. Older ones are deleted.
	EventTTL time.Duration
	// Now is the clock that ages Events and stamps namespace conditions;
	// time.Now by default.
	Now func() time.Time
}

// Collector is the garbage collector of one Service. Run runs it.
type Collector struct {
	svc  *engine.Service
	st   store.Store
	log  *slog.Logger
	opts Options

	// running is set while Run runs: the queue belongs to one run at a time.
	running atomic.Bool
	q       *workqueue.Queue[types.UID] // replaced when a Run ends

	mu sync.RWMutex
	g  *gcGraph // guarded by mu; replaced by a relist

	// rev is the store revision the graph reflects, 0 before the first list.
	rev atomic.Int64
	// relists counts the lists the graph was built from.
	relists atomic.Int64
}

// New returns the collector of svc, which serves from opts.Store. It does
// nothing until Run.
func New(svc *engine.Service, opts Options) (*Collector, error) {
	if svc == nil {
		return nil, errors.New("gc: a Service is required")
	}
	if opts.Store == nil {
		return nil, errors.New("gc: Options.Store is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = 10 * time.Minute
	}
	if opts.EventTTL <= 0 {
		opts.EventTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Collector{svc: svc, st: opts.Store, log: opts.Logger, opts: opts, q: newQueue(), g: newGCGraph()}, nil
}

// User is the identity the collector writes as: its deletes, orphanings
// and finalizer removals are audited as
// "system:setpoint:garbage-collector", as kube-controller-manager's are as
// system:serviceaccount:kube-system:generic-garbage-collector.
var User = engine.SystemUser("system:setpoint:garbage-collector")

// Run collects until ctx is done and returns after every goroutine it
// started has stopped: the follower and the workers of the incremental
// collector (collector.go), and the loop of the periodic passes (the sweep
// and the expiry of Events). One Run at a time: a second one while the first
// runs returns ErrRunning at once; after it returns, the Collector may Run
// again, with a new queue and a new list of the store.
func (c *Collector) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer c.running.Store(false)
	ctx = engine.WithSystemUser(ctx, User)
	var wg sync.WaitGroup
	wg.Go(func() { c.follow(ctx) })
	for range workers {
		wg.Go(func() {
			for c.work(ctx) {
			}
		})
	}
	wg.Go(func() { c.periodic(ctx) })
	<-ctx.Done()
	c.q.ShutDown()
	wg.Wait()
	c.q = newQueue()
	return nil
}

// periodic runs the sweep every SweepInterval and the Event expiry until ctx
// is done.
func (c *Collector) periodic(ctx context.Context) {
	sweep := time.NewTicker(c.opts.SweepInterval)
	defer sweep.Stop()
	events := time.NewTicker(c.eventPeriod())
	defer events.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-events.C:
			if err := c.expireEvents(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("event expiry failed", "err", err)
			}
		case <-sweep.C:
			c.sweepRounds(ctx)
		}
	}
}
