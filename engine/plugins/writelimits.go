package plugins

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/setpoint-dev/setpoint/engine/controller"
)

// WriteLimits bound the writes each plugin makes: its host-call creates,
// updates and patches, and the children its reconciles ask for. Zero values
// get the defaults.
type WriteLimits struct {
	// Rate is how many writes per second one plugin may make on average.
	// Default DefaultWriteRate.
	Rate float64
	// Burst is how many writes one plugin may make at once above Rate.
	// Default DefaultWriteBurst.
	Burst int
	// MaxChildren is how many children one reconcile may ask for. Default
	// DefaultMaxChildren.
	MaxChildren int
	// Now is the rate limit's clock. Default time.Now.
	Now func() time.Time
}

// Defaults of WriteLimits.
const (
	DefaultWriteRate   = 100
	DefaultWriteBurst  = 1000
	DefaultMaxChildren = 1000
)

func (o WriteLimits) withDefaults() WriteLimits {
	if o.Rate <= 0 {
		o.Rate = DefaultWriteRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultWriteBurst
	}
	if o.MaxChildren <= 0 {
		o.MaxChildren = DefaultMaxChildren
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// WriteLimiter keeps one token bucket per plugin, shared by its host-call
// writes and its children, and counts the writes it refuses in
// setpoint_plugin_writes_throttled_total. It is safe for concurrent use.
type WriteLimiter struct {
	opts      WriteLimits
	throttled *prometheus.CounterVec // nil: not registered

	// objects, when set, bounds the objects each plugin has created.
	objects *ObjectQuota

	mu      sync.Mutex // guards buckets
	buckets map[string]*rate.Limiter
}

// LimitObjects has q bound the live objects each plugin has created, its
// host-call creates and its children together. Call it before the host
// serves calls.
func (w *WriteLimiter) LimitObjects(q *ObjectQuota) { w.objects = q }

// quota is w's object quota, nil when w or it is not set.
func (w *WriteLimiter) quota() *ObjectQuota {
	if w == nil {
		return nil
	}
	return w.objects
}

// allowCreate is allow for a create of obj (a gr), then the object quota,
// which labels obj as plugin's.
func (w *WriteLimiter) allowCreate(ctx context.Context, plugin, source string, gr schema.GroupResource, obj *unstructured.Unstructured) error {
	if w == nil {
		return nil
	}
	take := w.allow
	if source == sourceChildren {
		take = func(plugin, source string) error { return w.wait(ctx, plugin, source) }
	}
	if err := take(plugin, source); err != nil {
		return err
	}
	return w.objects.admit(ctx, plugin, source, gr, obj)
}

// NewWriteLimiter returns a limiter with opts; reg, when set, gets its
// counter.
func NewWriteLimiter(opts WriteLimits, reg prometheus.Registerer) (*WriteLimiter, error) {
	w := &WriteLimiter{opts: opts.withDefaults(), buckets: map[string]*rate.Limiter{}}
	if reg != nil {
		w.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "plugin", Name: "writes_throttled_total",
			Help: "Writes of a plugin over its write rate limit: host calls refused with 429, children delayed for their turn (or refused with 429 when it is too far off).",
		}, []string{"plugin", "source"})
		if err := reg.Register(w.throttled); err != nil {
			return nil, fmt.Errorf("plugins: register write metrics: %w", err)
		}
	}
	return w, nil
}

// Sources of writes, as the throttled counter labels them.
const (
	sourceHostCall = "host_call"
	sourceChildren = "children"
)

// bucket is plugin's token bucket.
func (w *WriteLimiter) bucket(plugin string) *rate.Limiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buckets[plugin]
	if b == nil {
		b = rate.NewLimiter(rate.Limit(w.opts.Rate), w.opts.Burst)
		w.buckets[plugin] = b
	}
	return b
}

// allow takes one write from plugin's bucket, or returns the 429 Status
// error that refuses it, counted under source.
func (w *WriteLimiter) allow(plugin, source string) error {
	if w == nil {
		return nil
	}
	if w.bucket(plugin).AllowN(w.opts.Now(), 1) {
		return nil
	}
	w.count(plugin, source)
	return w.refusal(plugin)
}

// maxChildWait is the longest a child write waits for its turn in its
// plugin's bucket before it is refused.
const maxChildWait = 5 * time.Second

// wait takes one write from plugin's bucket for a child the controller
// writes, waiting for its turn as client-go's rate limiter makes a
// controller wait, up to maxChildWait and ctx's deadline; a write whose turn
// is further off is refused as allow refuses it. Failing at once would fail
// the reconcile, and its per-object backoff would hold convergence far
// below the rate the limit allows.
func (w *WriteLimiter) wait(ctx context.Context, plugin, source string) error {
	if w == nil {
		return nil
	}
	now := w.opts.Now()
	r := w.bucket(plugin).ReserveN(now, 1)
	if !r.OK() {
		w.count(plugin, source)
		return w.refusal(plugin)
	}
	d := r.DelayFrom(now)
	if d == 0 {
		return nil
	}
	w.count(plugin, source)
	limit := maxChildWait
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(dl))
	}
	if d > limit {
		r.CancelAt(now)
		return w.refusal(plugin)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.CancelAt(w.opts.Now())
		return ctx.Err()
	}
}

func (w *WriteLimiter) count(plugin, source string) {
	if w.throttled != nil {
		w.throttled.WithLabelValues(plugin, source).Inc()
	}
}

// refusal is the 429 Status error of a write over plugin's limit.
func (w *WriteLimiter) refusal(plugin string) error {
	retry := int(math.Ceil(1 / w.opts.Rate))
	return apierrors.NewTooManyRequests(fmt.Sprintf(
		"plugin %s writes faster than its limit of %g writes/s (burst %d); retry later", plugin, w.opts.Rate, w.opts.Burst), max(retry, 1))
}

// checkChildren refuses a reconcile response with more children than the
// quota, as a terminal error of the plugin's.
func (w *WriteLimiter) checkChildren(n int) error {
	if w == nil || n <= w.opts.MaxChildren {
		return nil
	}
	return fmt.Errorf("the plugin asked for %d children of one object, more than the quota of %d", n, w.opts.MaxChildren)
}

// Forget drops a deleted plugin's bucket and series.
func (w *WriteLimiter) Forget(plugin string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	delete(w.buckets, plugin)
	w.mu.Unlock()
	w.objects.Forget(plugin)
	if w.throttled != nil {
		w.throttled.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
	}
}

// Client returns c with plugin's creates and updates of the kinds in owns
// (its children) taken from plugin's bucket; its other writes (status,
// finalizers, events, deletes) pass.
func (w *WriteLimiter) Client(plugin string, c controller.Client, owns []controller.Kind) controller.Client {
	if w == nil || len(owns) == 0 {
		return c
	}
	lc := &limitedClient{Client: c, w: w, plugin: plugin, owns: map[schema.GroupResource]bool{}}
	for _, k := range owns {
		lc.owns[k.Resource.GroupResource()] = true
	}
	return lc
}

// limitedClient is a controller's Client whose child writes are rate
// limited.
type limitedClient struct {
	controller.Client
	w      *WriteLimiter
	plugin string
	owns   map[schema.GroupResource]bool
}

func (c *limitedClient) Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error) {
	if c.owns[gvr.GroupResource()] {
		if err := c.w.allowCreate(ctx, c.plugin, sourceChildren, gvr.GroupResource(), obj); err != nil {
			return nil, err
		}
	}
	return c.Client.Create(ctx, gvr, obj, opts)
}

func (c *limitedClient) Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	if c.owns[gvr.GroupResource()] {
		if err := c.w.wait(ctx, c.plugin, sourceChildren); err != nil {
			return nil, err
		}
		if c.w.objects != nil {
			// A child keeps the label that counts it.
			l := obj.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l[CreatedByLabel] = c.plugin
			obj.SetLabels(l)
		}
	}
	return c.Client.Update(ctx, gvr, obj, opts)
}
