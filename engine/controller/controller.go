package controller

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine/workqueue"
)

// Options configures a Controller. Zero values get defaults in New.
type Options struct {
	// Name identifies the controller (usually its plugin's name): in logs,
	// metrics, events and the default finalizer. Required.
	Name string
	// Client reaches the objects. Required.
	Client Client
	// For is the kind the controller reconciles. Required.
	For Kind
	// Owns are the kinds of the children the controller manages.
	Owns []Kind
	// Reconciler computes the desired state. Required.
	Reconciler Reconciler
	// Finalizer, when set, runs on deletion: the controller keeps
	// FinalizerName on its objects until it reports done.
	Finalizer Finalizer
	// Gone, when set, is called with the key of an object a reconcile
	// finds deleted (gone from the store, its finalizers done), so that
	// state kept in memory about it can go too, on every replica that
	// runs the controller, whichever removed the last finalizer.
	Gone func(Key)
	// FinalizerName is the finalizer the controller owns. Default
	// "setpoint.dev/" + Name.
	FinalizerName string
	// FieldManager names the controller's writes (children, status,
	// finalizers, events) in the managedFields of objects that are
	// server-side applied. Default "setpoint-controller/" + Name. Either is
	// cut, at a rune boundary, to the 128 bytes a field manager may have.
	FieldManager string
	// Config is handed to the plugin in every request.
	Config map[string]string
	// Namespace restricts the controller to one namespace; "" watches all.
	Namespace string
	// Workers is how many objects are reconciled at once. Default 4:
	// reconciles mostly wait on durable writes, so a few more workers than
	// cores raise throughput (see BenchmarkConvergeNative).
	Workers int
	// ResyncPeriod is how often every object is reconciled again even
	// without a change. Default 10 minutes; negative disables it.
	ResyncPeriod time.Duration
	// RateLimiter decides the backoff of failed objects. Default
	// workqueue.DefaultRateLimiter.
	RateLimiter workqueue.RateLimiter[Key]
	// Metrics records the controller's metrics. Default: none.
	Metrics *Metrics
	// User, when set, is the identity the controller's reads and writes
	// are made as (children, status, finalizers, events), so that
	// admission checks them as it checks that user's other writes. Default:
	// the server's own, unnamed.
	User user.Info
	// Logger receives the controller's logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of condition and event timestamps. Default time.Now.
	Now func() time.Time
}

// Controller reconciles the objects of one kind through one plugin. It is
// safe for concurrent use; Run may be called again after it returned.
type Controller struct {
	opts  Options
	owns  map[schema.GroupKind]Kind
	log   *slog.Logger
	stats *controllerMetrics
}

// New checks opts and returns a controller ready to Run.
func New(opts Options) (*Controller, error) {
	switch {
	case opts.Name == "":
		return nil, fmt.Errorf("%w: Name is required", ErrInvalidOptions)
	case opts.Client == nil:
		return nil, fmt.Errorf("%w: Client is required", ErrInvalidOptions)
	case opts.Reconciler == nil:
		return nil, fmt.Errorf("%w: Reconciler is required", ErrInvalidOptions)
	case opts.For.Kind == "" || opts.For.Resource.Resource == "" || opts.For.Resource.Version == "":
		return nil, fmt.Errorf("%w: For needs a resource, version and kind", ErrInvalidOptions)
	}
	owns := make(map[schema.GroupKind]Kind, len(opts.Owns))
	for _, k := range opts.Owns {
		if k.Kind == "" || k.Resource.Resource == "" || k.Resource.Version == "" {
			return nil, fmt.Errorf("%w: Owns needs a resource, version and kind", ErrInvalidOptions)
		}
		gk := k.GroupVersionKind().GroupKind()
		if _, dup := owns[gk]; dup {
			return nil, fmt.Errorf("%w: kind %s owned twice", ErrInvalidOptions, gk)
		}
		owns[gk] = k
	}
	if opts.FinalizerName == "" {
		opts.FinalizerName = "setpoint.dev/" + opts.Name
	}
	if opts.FieldManager == "" {
		opts.FieldManager = "setpoint-controller/" + opts.Name
	}
	if len(opts.FieldManager) > metav1validation.FieldManagerMaxLength {
		// Cut at a rune boundary: a cut inside a multi-byte rune would
		// leave invalid UTF-8 in every managedFields entry.
		cut := metav1validation.FieldManagerMaxLength
		for cut > 0 && !utf8.RuneStart(opts.FieldManager[cut]) {
			cut--
		}
		opts.FieldManager = opts.FieldManager[:cut]
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = 10 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Controller{
		opts:  opts,
		owns:  owns,
		log:   opts.Logger.With("controller", opts.Name, "kind", opts.For.Kind),
		stats: opts.Metrics.forController(opts.Name),
	}, nil
}

// withUser makes ctx carry the controller's identity, if it has one.
func (c *Controller) withUser(ctx context.Context) context.Context {
	if c.opts.User == nil {
		return ctx
	}
	return request.WithUser(ctx, c.opts.User)
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.opts.Name }

// kinds returns the kinds whose caches the controller uses: For, then Owns.
func (c *Controller) kinds() []Kind {
	return append([]Kind{c.opts.For}, c.opts.Owns...)
}

// run is the state of one Run: the queue, the handlers on the caches, and
// what the run remembers of its own work. The caches may be shared with
// other controllers; everything else is the run's own.
type run struct {
	queue    *workqueue.Queue[Key]
	primary  *informer
	children []*informer
	// events are the queues of the event writers (recordEvents), one per
	// worker; an event goes to the one its aggregation key hashes to.
	events []chan pendingEvent
	// own tracks the controller's writes the primary cache has not seen.
	own *ownWrites
	// terminal tracks the objects this run found failing terminally.
	terminal *terminalSeen
	// used are the caches the run took from informers; unregister removes
	// the run's handlers from them.
	informers  *sharedInformers
	used       []*sharedInformer
	unregister []func()
}

// Run starts the caches, waits for their first list, then reconciles with
// Workers workers until ctx is done. It returns after every goroutine it
// started has stopped. Run on its own, a controller shares its caches with
// nobody; a Manager shares them among its controllers.
//
// Threads: one goroutine per cache (list and watch of a kind, see
// sharedInformers), Workers workers that take keys from the queue and
// reconcile them, a resync goroutine that enqueues every cached object each
// ResyncPeriod, and Workers event writers that write the workers' events
// from bounded queues so that events never delay a reconcile. The queue is the
// only state the workers share with the caches; the caches own their maps
// under their own locks, and call the run's handlers, which only add to the
// queue, on their goroutines.
func (c *Controller) Run(ctx context.Context) error {
	ctx = c.withUser(ctx)
	return c.runStarted(ctx, c.start(ctx, newSharedInformers(c.log), nil))
}

// start creates the run's queue and registers its handlers on the caches
// from informers, which replay the cached objects into the queue. own, when
// set, are the pending writes of the predecessor this run replaces.
func (c *Controller) start(ctx context.Context, informers *sharedInformers, own *ownWrites) *run {
	if own == nil {
		own = newOwnWrites()
	}
	r := &run{queue: workqueue.New(workqueue.Options[Key]{
		Name:        c.opts.Name,
		RateLimiter: c.opts.RateLimiter, // nil: a fresh default per Run
		Metrics:     c.opts.Metrics.queueProvider(),
	}), events: newEventShards(c.opts.Workers), own: own, terminal: newTerminalSeen(), informers: informers}
	for i, k := range c.kinds() {
		si := informers.acquire(ctx, k, c.opts.Client, c.opts.Namespace)
		r.used = append(r.used, si)
		if i == 0 {
			r.primary = si.informer
			r.unregister = append(r.unregister, si.register(func(old, cur *unstructured.Unstructured) { c.onPrimary(r, old, cur) }))
			// The replay forgot what the cache has caught up with; forget
			// too the objects deleted while no handler was registered.
			r.own.retain(func(k Key) bool { _, ok := r.primary.get(k); return ok })
			continue
		}
		r.children = append(r.children, si.informer)
		r.unregister = append(r.unregister, si.register(func(old, cur *unstructured.Unstructured) {
			c.enqueueOwner(r, old)
			c.enqueueOwner(r, cur)
		}))
	}
	return r
}

// stop removes the run's handlers and releases its caches.
func (r *run) stop() {
	for _, f := range r.unregister {
		f()
	}
	r.informers.releaseAll(r.used)
}

// onPrimary handles a change of an object of the controller's kind.
func (c *Controller) onPrimary(r *run, old, cur *unstructured.Unstructured) {
	if cur == nil {
		r.own.forget(Key{old.GetNamespace(), old.GetName()})
	} else {
		r.own.stale(Key{cur.GetNamespace(), cur.GetName()}, cur.GetResourceVersion()) // forgets a write the cache has caught up with
	}
	if !changeMatters(old, cur) {
		return
	}
	o := cur
	if o == nil {
		o = old
	}
	r.queue.Add(Key{o.GetNamespace(), o.GetName()})
}

// runStarted waits for r's caches, then reconciles until ctx is done, and
// stops r.
func (c *Controller) runStarted(ctx context.Context, r *run) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer r.stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer r.queue.ShutDown()
	defer cancel()
	for _, si := range r.used {
		select {
		case <-ctx.Done():
			return nil
		case <-si.synced:
		}
	}
	c.log.Info("controller started", "workers", c.opts.Workers)
	wg.Go(func() { c.recordEvents(ctx, r) })
	for range c.opts.Workers {
		wg.Go(func() { c.work(ctx, r) })
	}
	if c.opts.ResyncPeriod > 0 {
		wg.Go(func() { c.resync(ctx, r) })
	}
	<-ctx.Done()
	c.log.Info("controller stopping")
	return nil
}

// changeMatters reports whether a change of an object of the controller's
// kind calls for a reconcile. A change of status alone does not: it is
// usually the controller's own write, and reconciling on it would call the
// plugin twice per change and defeat backoff. Status edited by someone else
// is put right at the next resync. Because the controller's own status
// write triggers nothing, a reconcile that runs before the cache has seen
// that write reads the object afresh (see ownWrites). A change of what the
// object asks for is one of its generation or, for the built-in kinds that
// have none, of its content (see contentChanged).
func changeMatters(old, cur *unstructured.Unstructured) bool {
	if old == nil || cur == nil {
		return true
	}
	return old.GetGeneration() != cur.GetGeneration() ||
		!old.GetDeletionTimestamp().Equal(cur.GetDeletionTimestamp()) ||
		!slices.Equal(old.GetFinalizers(), cur.GetFinalizers()) ||
		!maps.Equal(old.GetLabels(), cur.GetLabels()) ||
		!maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) ||
		old.GetUID() != cur.GetUID() ||
		contentChanged(old.Object, cur.Object)
}

// enqueueOwner adds the key of the object that controls child, if it is of
// the controller's kind.
func (c *Controller) enqueueOwner(r *run, child *unstructured.Unstructured) {
	if child == nil {
		return
	}
	ref, ok := controllerOf(child)
	if !ok || ref.Kind != c.opts.For.Kind {
		return
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != c.opts.For.Resource.Group {
		return
	}
	ns := ""
	if c.opts.For.Namespaced {
		ns = child.GetNamespace()
	}
	r.queue.Add(Key{ns, ref.Name})
}

func (c *Controller) resync(ctx context.Context, r *run) {
	t := time.NewTicker(c.opts.ResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, k := range r.primary.keys() {
				r.queue.Add(k)
			}
		}
	}
}

// work reconciles keys until the queue shuts down.
func (c *Controller) work(ctx context.Context, r *run) {
	for {
		key, shutdown := r.queue.Get()
		if shutdown {
			return
		}
		if ctx.Err() != nil {
			r.queue.Done(key)
			continue
		}
		c.process(ctx, r, key)
		r.queue.Done(key)
	}
}

// safeReconcile turns a panic anywhere in a reconcile into an error, so that
// a bug hit by one object backs that object off instead of stopping the
// server.
func (c *Controller) safeReconcile(ctx context.Context, r *run, key Key) (res result) {
	defer func() {
		if p := recover(); p != nil {
			res = result{err: fmt.Errorf("%w: %v", ErrPanic, p)}
		}
	}()
	return c.reconcile(ctx, r, key)
}

// process reconciles key once and schedules its next reconcile.
func (c *Controller) process(ctx context.Context, r *run, key Key) {
	start := time.Now()
	res := c.safeReconcile(ctx, r, key)
	c.stats.observe(res, time.Since(start))
	switch {
	case ctx.Err() != nil:
		return
	case res.err != nil && !res.terminal:
		level := slog.LevelWarn
		if suspended(res.err) {
			level = slog.LevelDebug
		}
		c.log.Log(ctx, level, "reconcile failed", "namespace", key.Namespace, "name", key.Name, "err", res.err, "attempt", r.queue.NumRequeues(key)+1)
		r.queue.AddRateLimited(key)
	default:
		if res.err != nil {
			c.log.Warn("reconcile failed terminally", "namespace", key.Namespace, "name", key.Name, "err", res.err)
		}
		r.queue.Forget(key)
		if res.requeueAfter > 0 {
			r.queue.AddAfter(key, res.requeueAfter)
		}
	}
}
