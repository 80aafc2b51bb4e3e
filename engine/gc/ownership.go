package gc

import (
	"context"
	"errors"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// collectOwnership does what o's owner references and deletion call for:
// Orphan and Foreground deletion of o's dependents deps, and the deletion of
// o (or of its references) when its owners are gone. known tells whether an
// owner is known to exist; one that is not is looked up in the store.
func (c *Collector) collectOwnership(ctx context.Context, o *gcObject, deps []*gcObject, known func(types.UID) bool) (bool, error) {
	obj, r := o.obj, o.res
	gvr, ns, name := r.GVR, obj.GetNamespace(), obj.GetName()
	background := metav1.DeletePropagationBackground
	if obj.GetDeletionTimestamp() != nil {
		fins := obj.GetFinalizers()
		if slices.Contains(fins, metav1.FinalizerOrphanDependents) {
			for _, d := range deps {
				if err := c.dropOwnerRefs(ctx, d, func(r metav1.OwnerReference) bool { return r.UID == obj.GetUID() }); err != nil {
					return false, err
				}
			}
			return true, c.removeFinalizer(ctx, o, metav1.FinalizerOrphanDependents)
		}
		if slices.Contains(fins, metav1.FinalizerDeleteDependents) {
			blocking, deleted := false, false
			fg := metav1.DeletePropagationForeground
			for _, d := range deps {
				if d.obj.GetDeletionTimestamp() == nil {
					if _, _, err := c.svc.DeleteObject(ctx, d.res.GVR, d.obj.GetNamespace(), d.obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
						return deleted, err
					}
					deleted = true
				}
				for _, r := range d.obj.GetOwnerReferences() {
					if r.UID == obj.GetUID() && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
						blocking = true
					}
				}
			}
			if !blocking {
				return true, c.removeFinalizer(ctx, o, metav1.FinalizerDeleteDependents)
			}
			return deleted, nil
		}
	}
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return false, nil
	}
	gone := map[types.UID]bool{}
	for _, ref := range refs {
		if known(ref.UID) || !c.ownerGone(ctx, ns, ref) {
			continue
		}
		gone[ref.UID] = true
	}
	switch {
	case len(gone) == 0:
		return false, nil
	case len(gone) == len(refs):
		if obj.GetDeletionTimestamp() != nil {
			return false, nil
		}
		// The references came from the graph or a list, which may lag a
		// write that gave the object a live owner: decide on the stored
		// object (its metadata: decodeForGC), and delete only that revision
		// of it.
		kv, err := c.st.Get(ctx, store.ObjectKey(gvr.Group, gvr.Resource, ns, name), store.GetOptions{})
		if err != nil {
			return false, storeError(err, gvr.GroupResource(), name)
		}
		cur, err := decodeForGC(kv)
		if err != nil {
			return false, err
		}
		if cur.GetUID() != obj.GetUID() || cur.GetDeletionTimestamp() != nil || !sameOwnerUIDs(cur.GetOwnerReferences(), refs) {
			return true, nil // changed since: its next event brings it back
		}
		rv := strconv.FormatInt(kv.ModRevision, 10)
		_, _, err = c.svc.DeleteObject(ctx, gvr, ns, name, metav1.DeleteOptions{
			PropagationPolicy: &background,
			Preconditions:     &metav1.Preconditions{UID: ptrUID(obj.GetUID()), ResourceVersion: &rv},
		})
		return err == nil, err
	default:
		return true, c.dropOwnerRefs(ctx, o, func(r metav1.OwnerReference) bool { return gone[r.UID] })
	}
}

func ptrUID(u types.UID) *types.UID { return &u }

// sameOwnerUIDs tells whether a and b name the same owners, in order.
func sameOwnerUIDs(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool { return x.UID == y.UID })
}

// finishDeletion deletes the object uid when it is still deleting with no
// finalizer left (engine.Service.FinishDeletion).
func (c *Collector) finishDeletion(ctx context.Context, r kinds.Resource, ns, name string, uid types.UID) (done bool, err error) {
	done, err = c.svc.FinishDeletion(ctx, r.GVR, ns, name, uid)
	if done {
		c.log.Info("garbage collection finished a deletion left without finalizers", "kind", r.Kind, "namespace", ns, "name", name)
	}
	return done, err
}

// ownerGone checks with a live read that the owner a reference names is
// absent (or replaced by an object with another uid). An owner of a kind that
// is not served is never considered gone.
func (c *Collector) ownerGone(ctx context.Context, ns string, ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	r, ok := c.svc.ResourceForKind(gv.WithKind(ref.Kind))
	if !ok {
		return false
	}
	if !r.Namespaced {
		ns = ""
	}
	kv, err := c.st.Get(ctx, store.ObjectKey(r.GVR.Group, r.GVR.Resource, ns, ref.Name), store.GetOptions{})
	if err != nil {
		return errors.Is(err, store.ErrNotFound)
	}
	cur, err := kinds.DecodeMap(kv.Value)
	return err == nil && (&unstructured.Unstructured{Object: cur}).GetUID() != ref.UID
}

// dropOwnerRefs removes the owner references drop selects from o.
func (c *Collector) dropOwnerRefs(ctx context.Context, o *gcObject, drop func(metav1.OwnerReference) bool) error {
	return c.modify(ctx, o, func(u *unstructured.Unstructured) bool {
		refs := u.GetOwnerReferences()
		kept := slices.DeleteFunc(slices.Clone(refs), drop)
		if len(kept) == len(refs) {
			return false
		}
		u.SetOwnerReferences(kept)
		return true
	})
}

func (c *Collector) removeFinalizer(ctx context.Context, o *gcObject, f string) error {
	return c.modify(ctx, o, func(u *unstructured.Unstructured) bool {
		fins := u.GetFinalizers()
		if !slices.Contains(fins, f) {
			return false
		}
		u.SetFinalizers(slices.DeleteFunc(slices.Clone(fins), func(x string) bool { return x == f }))
		return true
	})
}

// modify updates the current version of o with change, retrying conflicts.
func (c *Collector) modify(ctx context.Context, o *gcObject, change func(*unstructured.Unstructured) bool) error {
	for attempt := 1; ; attempt++ {
		cur, err := c.svc.Get(ctx, o.res.GVR, o.obj.GetNamespace(), o.obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.GetUID() != o.obj.GetUID() || !change(cur) {
			return nil
		}
		_, err = c.svc.Update(ctx, o.res.GVR, cur, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) && attempt < maxConflictRetries {
			continue
		}
		return err
	}
}
