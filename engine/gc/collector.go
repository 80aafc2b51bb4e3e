package gc

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/workqueue"
	"github.com/setpoint-dev/setpoint/store"
)

// The incremental collector. One goroutine (follow) lists every served
// resource at one revision into the ownership graph, then watches the whole
// keyspace from that revision and applies each event to the graph; a watch
// that cannot resume (its revision compacted) or fails makes it list again.
// Each event adds to a work queue the uids of the objects it may have made
// collectable:
//   - an object deleted: its dependents; its owners waiting in foreground
//     deletion; its namespace when terminating; its CRD when terminating;
//   - an object added or changed: itself when it is deleting with a
//     finalizer the collector removes (orphan, foregroundDeletion, a
//     namespace's, a CRD's) or when one of its owners is not in the graph;
//     its owners waiting in foreground deletion when its owner references or
//     deletion state changed; a new object, itself when its namespace is not
//     in the graph, and its terminating namespace or CRD.
// workers goroutines take uids from the queue and attempt to collect each
// (attempt), with live reads before any delete; a failed attempt is retried
// with backoff. So the work a delete causes is proportional to what it
// affects, not to the size of the store. The graph and the queue are owned by
// the collector; the graph is guarded by mu, and its nodes are never changed
// once in it (a change replaces the node), so a worker reads a node without
// the lock.

// workers is the number of goroutines attempting collections.
const workers = 2

func newQueue() *workqueue.Queue[types.UID] {
	return workqueue.New(workqueue.Options[types.UID]{
		Name:        "garbage-collector",
		RateLimiter: workqueue.NewExponential[types.UID](10*time.Millisecond, 10*time.Second),
	})
}

// follow lists and watches the store into the graph until ctx is done.
func (c *Collector) follow(ctx context.Context) {
	for ctx.Err() == nil {
		rev, err := c.relist(ctx)
		for err == nil {
			rev, err = c.watch(ctx, rev)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrCompacted) {
			c.log.Info("garbage collector relists", "rev", rev, "err", err)
			continue
		}
		c.log.Warn("garbage collector watch restarts", "rev", rev, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// relist builds a new graph from a list of every served resource at one
// revision, replaces the graph with it, queues every object it shows may be
// collectable and returns the revision.
func (c *Collector) relist(ctx context.Context) (int64, error) {
	g := newGCGraph()
	// The objects of a resource walk skips stay out of the graph: a
	// dependent whose owner is among them is checked with a live read,
	// which fails the same way, so it is never taken for an orphan.
	rev, _, err := c.walk(ctx, "relist", true, func(r kinds.Resource, items []store.KeyValue) {
		gr := r.GVR.GroupResource()
		for i := range items {
			if m, ok := engine.DecodeStoredMeta(items[i].Value); ok {
				g.put(g.node(gr, &m))
			}
		}
	})
	if err != nil {
		return 0, err
	}
	var add []types.UID
	for _, n := range g.nodes {
		switch {
		case n.acting(), n.stranded(), g.ownersMissing(n):
			add = append(add, n.uid)
		case n.namespace != "":
			if ns := g.namespaces[n.namespace]; ns == nil {
				add = append(add, n.uid)
			} else if ns.deleting() {
				add = append(add, ns.uid)
			}
		}
	}
	c.mu.Lock()
	c.g = g
	c.mu.Unlock()
	c.rev.Store(rev)
	c.relists.Add(1)
	for _, uid := range add {
		c.q.Add(uid)
	}
	return rev, nil
}

// watch applies the store's events after rev to the graph and returns the
// revision it reached; a nil error means the watch may resume from there.
func (c *Collector) watch(ctx context.Context, rev int64) (int64, error) {
	w, err := c.st.Watch(ctx, "/", rev)
	if err != nil {
		return rev, err
	}
	defer w.Stop()
	for ev := range w.Events() {
		c.apply(ev)
		rev = ev.Revision()
		c.rev.Store(rev)
	}
	if err := w.Err(); err != nil && !errors.Is(err, store.ErrWatcherTooSlow) {
		return rev, err
	}
	return rev, ctx.Err()
}

// apply applies one store event to the graph and queues what it may have
// made collectable.
func (c *Collector) apply(ev store.Event) {
	gr, ok := grFromKey(ev.Object.Key)
	if !ok {
		return
	}
	m, ok := engine.DecodeStoredMeta(ev.Object.Value)
	if !ok {
		return
	}
	var add []types.UID
	c.mu.Lock()
	g := c.g
	n := g.node(gr, &m)
	if ev.Type == store.Deleted {
		g.remove(n.uid)
		for d := range g.dependents[n.uid] {
			add = append(add, d.uid)
		}
		add = c.ownersWaiting(g, n, nil, add)
		add = c.containersWaiting(g, n, add)
	} else {
		old := g.put(n)
		ownersChanged := old == nil || !sameOwners(old.owners, n.owners)
		if n.acting() || n.stranded() || ownersChanged && g.ownersMissing(n) {
			add = append(add, n.uid)
		}
		if ownersChanged || old.flags != n.flags {
			add = c.ownersWaiting(g, n, old, add)
		}
		if old == nil {
			if n.namespace != "" && g.namespaces[n.namespace] == nil {
				add = append(add, n.uid)
			}
			add = c.containersWaiting(g, n, add)
		} else if old.deleting() && n.deleting() && n.namespace != "" {
			// A deleting object changed (one of its finalizers went): the
			// conditions of its terminating namespace may say otherwise now.
			if ns := g.namespaces[n.namespace]; ns != nil && ns.deleting() {
				add = append(add, ns.uid)
			}
		}
	}
	c.mu.Unlock()
	for _, uid := range add {
		c.q.Add(uid)
	}
}

// ownersWaiting appends the owners of n (and of old, its previous version)
// that are deleting with a finalizer the collector removes: their wait may
// be over.
func (c *Collector) ownersWaiting(g *gcGraph, n, old *gcNode, add []types.UID) []types.UID {
	for _, x := range []*gcNode{n, old} {
		if x == nil {
			continue
		}
		for _, o := range x.owners {
			if on := g.nodes[o.uid]; on != nil && on.acting() {
				add = append(add, on.uid)
			}
		}
	}
	return add
}

// containersWaiting appends the terminating namespace of n and the
// terminating CRD of n's resource.
func (c *Collector) containersWaiting(g *gcGraph, n *gcNode, add []types.UID) []types.UID {
	if n.namespace != "" {
		if ns := g.namespaces[n.namespace]; ns != nil && ns.deleting() {
			add = append(add, ns.uid)
		}
	}
	for _, crd := range g.crds {
		if crd.acting() {
			if r, ok := c.svc.ServedResource(n.res.gr); ok && r.CRD != "" {
				if cn := g.crds[r.CRD]; cn != nil && cn.acting() {
					add = append(add, cn.uid)
				}
			}
			break
		}
	}
	return add
}

// work attempts one queued uid; false once the queue is shut down.
func (c *Collector) work(ctx context.Context) bool {
	uid, shutdown := c.q.Get()
	if shutdown {
		return false
	}
	defer c.q.Done(uid)
	err := c.attempt(ctx, uid)
	switch {
	case err == nil || apierrors.IsNotFound(err):
		c.q.Forget(uid)
	case ctx.Err() != nil:
	default:
		if !apierrors.IsConflict(err) && !errors.Is(err, errNotServedYet) {
			c.log.Warn("garbage collection", "uid", string(uid), "err", err)
		}
		c.q.AddRateLimited(uid)
	}
	return true
}

// known tells whether the graph holds uid.
func (c *Collector) known(uid types.UID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.nodes[uid] != nil
}

// attempt collects what the object uid calls for, as one step of the sweep
// (collect) does for it, reading the graph instead of a list of the store.
func (c *Collector) attempt(ctx context.Context, uid types.UID) error {
	c.mu.RLock()
	n := c.g.nodes[uid]
	var deps []*gcNode
	var ns *gcNode
	if n != nil {
		if n.acting() {
			for d := range c.g.dependents[uid] {
				deps = append(deps, d)
			}
		}
		if n.namespace != "" {
			ns = c.g.namespaces[n.namespace]
		}
	}
	c.mu.RUnlock()
	if n == nil {
		return nil
	}
	r, ok := c.svc.ServedResource(n.res.gr)
	if !ok {
		// A kind whose CRD this server has not caught up with yet (another
		// server created it): try again once it is served. Keys of anything
		// else (modules) are never the collector's.
		c.mu.RLock()
		crd := c.g.crds[n.res.gr.String()] // a CRD is named resource.group
		c.mu.RUnlock()
		if crd != nil && !crd.deleting() {
			return fmt.Errorf("%w: %s", errNotServedYet, n.res.gr)
		}
		return nil
	}
	o := gcObjectOf(r, n)
	// A deleted namespace is held by its spec.finalizers, which the graph
	// does not know, as well: it is emptied, and finalized, first.
	if r.GVR == kinds.NamespaceResource && n.deleting() {
		if done, err := c.emptyNamespace(ctx, o); done || err != nil {
			return err
		}
	}
	if n.stranded() {
		_, err := c.finishDeletion(ctx, r, n.namespace, n.name, n.uid)
		return err
	}
	if r.GVR == kinds.CRDResource && n.acting() && n.flags&gcCRDCleanupFin != 0 {
		if _, err := c.cleanupCRD(ctx, o, c.listGROf); err != nil {
			return err
		}
	}
	if handled, _, err := c.collectInNamespace(ctx, o, ns != nil, ns != nil && ns.deleting()); handled {
		return err
	}
	dobjs := make([]*gcObject, 0, len(deps))
	for _, d := range deps {
		if dr, ok := c.svc.ServedResource(d.res.gr); ok {
			dobjs = append(dobjs, gcObjectOf(dr, d))
		}
	}
	_, err := c.collectOwnership(ctx, o, dobjs, c.known)
	return err
}

// gcObjectOf builds the object a node stands for, metadata only.
func gcObjectOf(r kinds.Resource, n *gcNode) *gcObject {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetUID(n.uid)
	u.SetName(n.name)
	if n.namespace != "" {
		u.SetNamespace(n.namespace)
	}
	if n.deleting() {
		t := metav1.NewTime(time.Unix(0, 0))
		u.SetDeletionTimestamp(&t)
	}
	var fins []string
	for _, f := range []struct {
		flag uint8
		name string
	}{{gcOrphanFin, metav1.FinalizerOrphanDependents}, {gcForegroundFin, metav1.FinalizerDeleteDependents},
		{gcNamespaceFin, kinds.NamespaceFinalizer}, {gcCRDCleanupFin, apiextensionsv1.CustomResourceCleanupFinalizer}} {
		if n.flags&f.flag != 0 {
			fins = append(fins, f.name)
		}
	}
	if fins != nil {
		u.SetFinalizers(fins)
	}
	if len(n.owners) > 0 {
		refs := make([]metav1.OwnerReference, len(n.owners))
		for i, o := range n.owners {
			block := o.block
			refs[i] = metav1.OwnerReference{APIVersion: o.kind.apiVersion, Kind: o.kind.kind, Name: o.name, UID: o.uid, BlockOwnerDeletion: &block}
		}
		u.SetOwnerReferences(refs)
	}
	return &gcObject{res: r, obj: u}
}

// listGC lists the objects of r under prefix, metadata only.
func (c *Collector) listGC(ctx context.Context, r kinds.Resource, prefix string) ([]*gcObject, error) {
	var out []*gcObject
	_, err := store.ListPages(ctx, c.st, prefix, store.ListOptions{Limit: 1000}, func(items []store.KeyValue) error {
		for i := range items {
			if u, err := decodeForGC(&items[i]); err == nil {
				out = append(out, &gcObject{res: r, obj: u})
			}
		}
		return nil
	})
	if err != nil {
		return nil, storeError(err, r.GVR.GroupResource(), "")
	}
	return out, nil
}

// listGROf lists every object of a resource, metadata only: what the cleanup
// of a CRD being deleted works on.
func (c *Collector) listGROf(ctx context.Context, gr schema.GroupResource) ([]*gcObject, error) {
	r, ok := c.svc.ServedResource(gr)
	if !ok {
		return nil, nil
	}
	return c.listGC(ctx, r, store.ResourcePrefix(gr.Group, gr.Resource, ""))
}
