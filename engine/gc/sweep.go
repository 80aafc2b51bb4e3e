package gc

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// sweepRounds sweeps until a sweep changes nothing (at most maxRounds).
func (c *Collector) sweepRounds(ctx context.Context) {
	for round := 0; round < maxRounds && ctx.Err() == nil; round++ {
		changed, err := c.sweep(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("garbage collection sweep failed", "err", err)
			}
			return
		}
		if !changed {
			return
		}
	}
}

// gcObject is an object the collector works on: its resource, and its
// metadata (decodeForGC) or, for a node of the graph, what the graph keeps.
type gcObject struct {
	res kinds.Resource
	obj *unstructured.Unstructured
}

// sweep runs one mark-and-sweep over every stored object, the collector's
// safety net, and reports whether it changed anything.
func (c *Collector) sweep(ctx context.Context) (bool, error) {
	byUID := map[types.UID]*gcObject{}
	var all []*gcObject
	namespaces := map[string]*nsState{}
	_, skipped, err := c.walk(ctx, "sweep", false, func(r kinds.Resource, items []store.KeyValue) {
		for i := range items {
			u, err := decodeForGC(&items[i])
			if err != nil {
				continue
			}
			o := &gcObject{res: r, obj: u}
			byUID[u.GetUID()] = o
			all = append(all, o)
			if r.GVR == kinds.NamespaceResource {
				st := namespaces[u.GetName()]
				if st == nil {
					st = &nsState{}
					namespaces[u.GetName()] = st
				}
				st.terminating, st.obj = u.GetDeletionTimestamp() != nil, o
			} else if r.Namespaced {
				st := namespaces[u.GetNamespace()]
				if st == nil {
					st = &nsState{}
					namespaces[u.GetNamespace()] = st
				}
				st.contents++
			}
		}
	})
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(skipped, func(r kinds.Resource) bool { return r.Namespaced }) {
		// Objects it could not read may be in any namespace: none is empty.
		for _, st := range namespaces {
			st.contents++
		}
	}
	dependents := map[types.UID][]*gcObject{}
	for _, o := range all {
		for _, ref := range o.obj.GetOwnerReferences() {
			dependents[ref.UID] = append(dependents[ref.UID], o)
		}
	}
	changed := c.cleanupCRDs(ctx, all)
	for _, o := range all {
		ch, err := c.collect(ctx, o, byUID, dependents, namespaces)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			c.log.Warn("garbage collection", "kind", o.res.Kind, "namespace", o.obj.GetNamespace(), "name", o.obj.GetName(), "err", err)
		}
		changed = changed || ch || apierrors.IsConflict(err)
	}
	return changed, nil
}

// nsState is what a sweep learns about one namespace.
type nsState struct {
	obj         *gcObject // the Namespace, nil when it is gone
	terminating bool
	contents    int // namespaced objects in it
}

// collect does what one object of a sweep calls for.
func (c *Collector) collect(ctx context.Context, o *gcObject, byUID map[types.UID]*gcObject, dependents map[types.UID][]*gcObject, namespaces map[string]*nsState) (bool, error) {
	obj, r := o.obj, o.res
	gvr, ns, name := r.GVR, obj.GetNamespace(), obj.GetName()
	// A terminating namespace is finalized once it is empty.
	if r.GVR == kinds.NamespaceResource {
		if st := namespaces[name]; st != nil && st.terminating && st.contents == 0 {
			if changed, err := c.finalizeNamespace(ctx, o); changed || err != nil {
				return changed, err
			}
		}
	}
	if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 {
		// A namespace may be held by its spec.finalizers still.
		done, err := c.finishDeletion(ctx, r, ns, name, obj.GetUID())
		return done || r.GVR != kinds.NamespaceResource, err
	}
	st := namespaces[ns]
	if handled, changed, err := c.collectInNamespace(ctx, o, st != nil && st.obj != nil, st != nil && st.terminating); handled {
		return changed, err
	}
	if r.GVR == kinds.EventResource && c.eventExpired(obj) {
		background := metav1.DeletePropagationBackground
		_, _, err := c.svc.DeleteObject(ctx, gvr, ns, name, metav1.DeleteOptions{PropagationPolicy: &background})
		return err == nil, err
	}
	return c.collectOwnership(ctx, o, dependents[obj.GetUID()], func(uid types.UID) bool { return byUID[uid] != nil })
}
