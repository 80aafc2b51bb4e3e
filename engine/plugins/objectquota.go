package plugins

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
)

// CreatedByLabel is the label the server sets on each object a plugin
// creates, a host-call create or a child of its reconciles, to the plugin's
// name: the object quota counts the objects that carry it.
const CreatedByLabel = "setpoint.dev/created-by-plugin"

// Defaults of ObjectQuota.
const (
	// DefaultMaxObjects is how many live objects one plugin may have
	// created.
	DefaultMaxObjects = 10000
	// DefaultQuotaRecount is how long a plugin at its quota waits for the
	// next count of its objects in the store.
	DefaultQuotaRecount = 5 * time.Second
)

// ObjectQuota bounds how many live objects each plugin may have created. It
// keeps a count per plugin that goes up with each create it lets through
// and is set from the store (a count of the objects labelled CreatedByLabel
// with the plugin's name, over the kinds it may create) the first time and each
// time the count reaches the quota, at most once per Recount: deletes are
// not followed, a recount finds them. It is safe for concurrent use.
type ObjectQuota struct {
	max     int
	recount time.Duration
	now     func() time.Time
	count   func(ctx context.Context, plugin string) (int, error)
	refused *prometheus.CounterVec // nil: not registered
	// counting shares one count in the store among a plugin's concurrent
	// creates.
	counting singleflight.Group

	mu     sync.Mutex // guards counts
	counts map[string]*objectCount
}

type objectCount struct {
	n       int
	counted time.Time // zero: never counted from the store
}

// NewObjectQuota returns a quota of max objects per plugin (0: the default)
// counted in svc; reg, when set, gets its counter.
func NewObjectQuota(svc *engine.Service, max int, reg prometheus.Registerer) (*ObjectQuota, error) {
	q := newObjectQuota(max, func(ctx context.Context, plugin string) (int, error) { return countCreated(ctx, svc, plugin) })
	if reg != nil {
		q.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "plugin", Name: "objects_quota_refused_total",
			Help: "Creates of a plugin (host calls, children) refused because it has as many live objects as its object quota.",
		}, []string{"plugin", "source"})
		if err := reg.Register(q.refused); err != nil {
			return nil, fmt.Errorf("plugins: register object quota metrics: %w", err)
		}
	}
	return q, nil
}

func newObjectQuota(max int, count func(context.Context, string) (int, error)) *ObjectQuota {
	if max <= 0 {
		max = DefaultMaxObjects
	}
	return &ObjectQuota{max: max, recount: DefaultQuotaRecount, now: time.Now, count: count, counts: map[string]*objectCount{}}
}

// countCreated counts, kind by kind, the objects labelled as plugin's
// among the kinds it may create (createdKinds), reading their labels only.
func countCreated(ctx context.Context, svc *engine.Service, plugin string) (int, error) {
	grs, err := createdKinds(ctx, svc, plugin)
	if err != nil {
		return 0, fmt.Errorf("plugins: count the objects of plugin %s: %w", plugin, err)
	}
	sel := labels.SelectorFromSet(labels.Set{CreatedByLabel: plugin})
	n := 0
	for _, gr := range grs {
		r, ok := svc.ServedResource(gr)
		if !ok {
			continue // not served (yet, or any more): nothing of it is stored
		}
		c, err := svc.CountSelected(ctx, r.GVR, sel)
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue // its CRD went while we counted
			}
			return 0, fmt.Errorf("plugins: count the objects of plugin %s: %w", plugin, err)
		}
		n += c
	}
	return n, nil
}

// createdKinds are the resources plugin may create objects of, where the
// object quota looks for them: the kinds of its stored spec's
// permissions.write (host-call creates) and reconcile.owns (children). A
// spec that writes "*", or a Plugin that is gone or has no valid spec,
// gives every served resource: the count is never narrowed on a guess.
func createdKinds(ctx context.Context, svc *engine.Service, plugin string) ([]schema.GroupResource, error) {
	every := func() []schema.GroupResource {
		var out []schema.GroupResource
		for _, r := range svc.GroupResources() {
			out = append(out, r.GVR.GroupResource())
		}
		return out
	}
	obj, err := svc.Get(ctx, Resource, "", plugin, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return every(), nil
	}
	if err != nil {
		return nil, err
	}
	sp, err := specOf(obj)
	if err != nil {
		return every(), nil
	}
	var names []string
	for _, w := range sp.Permissions.Write {
		switch w {
		case "*":
			return every(), nil
		case "events": // the emit_event permission, not the Event kind
		default:
			names = append(names, w)
		}
	}
	if sp.Reconcile != nil {
		names = append(names, sp.Reconcile.Owns...)
	}
	var out []schema.GroupResource
	for _, name := range names {
		if gr := schema.ParseGroupResource(name); !slices.Contains(out, gr) {
			out = append(out, gr)
		}
	}
	return out, nil
}

// admit takes one object of plugin's quota for the create of obj (a gr)
// and labels obj as plugin's, or returns the 403 Forbidden Status that
// refuses it, counted under source.
func (q *ObjectQuota) admit(ctx context.Context, plugin, source string, gr schema.GroupResource, obj *unstructured.Unstructured) error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	c := q.counts[plugin]
	if c == nil {
		c = &objectCount{}
		q.counts[plugin] = c
	}
	stale := q.stale(c)
	q.mu.Unlock()
	if stale {
		// The count is set once, by the create that made it; the others
		// that waited for it go on from there.
		_, err, _ := q.counting.Do(plugin, func() (any, error) {
			q.mu.Lock()
			stale := q.stale(c)
			q.mu.Unlock()
			if !stale {
				return nil, nil // counted since this create looked
			}
			now := q.now()
			n, err := q.count(ctx, plugin)
			if err == nil {
				q.mu.Lock()
				c.n, c.counted = n, now
				q.mu.Unlock()
			}
			return nil, err
		})
		if err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	q.mu.Lock()
	n, ok := c.n, c.n < q.max
	if ok {
		// Counted before the create: a create that fails leaves the
		// count high until the next recount, never low.
		c.n++
	}
	q.mu.Unlock()
	if !ok {
		if q.refused != nil {
			q.refused.WithLabelValues(plugin, source).Inc()
		}
		return apierrors.NewForbidden(gr, obj.GetName(), fmt.Errorf(
			"plugin %s has created %d objects that still exist, its object quota of %d (--plugin-max-objects); delete some of them first",
			plugin, n, q.max))
	}
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[CreatedByLabel] = plugin
	obj.SetLabels(l)
	return nil
}

// stale tells whether c must be counted in the store again: never counted,
// or at the quota since Recount. Call it with mu held.
func (q *ObjectQuota) stale(c *objectCount) bool {
	return c.counted.IsZero() || c.n >= q.max && q.now().Sub(c.counted) >= q.recount
}

// Forget drops a deleted plugin's count and series.
func (q *ObjectQuota) Forget(plugin string) {
	if q == nil {
		return
	}
	q.mu.Lock()
	delete(q.counts, plugin)
	q.mu.Unlock()
	if q.refused != nil {
		q.refused.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
	}
}
