package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// decodeChild decodes a desired child as Unstructured.UnmarshalJSON does
// (an object with a kind), without reflection where it can.
func decodeChild(raw []byte) (*unstructured.Unstructured, error) {
	m, ok := objjson.Decode(raw)
	if !ok {
		u := &unstructured.Unstructured{}
		return u, u.UnmarshalJSON(raw)
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" {
		return nil, runtime.NewMissingKindErr(string(raw))
	}
	return u, nil
}

// applyChildren makes the children of parent match desired: it plans the
// writes against the observed children and performs them, all of them even
// when some fail.
func (c *Controller) applyChildren(ctx context.Context, parent *unstructured.Unstructured, observed []observedChild, desired []abi.RawJSON) error {
	want := make([]*unstructured.Unstructured, 0, len(desired))
	for i, raw := range desired {
		u, err := decodeChild(raw)
		if err != nil {
			return fmt.Errorf("child %d: %w: %v", i, ErrInvalidChild, err)
		}
		want = append(want, u)
	}
	cur := make([]*unstructured.Unstructured, len(observed))
	for i, o := range observed {
		cur[i] = o.obj
	}
	actions, err := planChildren(parent, c.opts.For.Namespaced, c.owns, cur, want)
	if err != nil {
		return err
	}
	var errs []error
	invalid := 0
	for _, a := range actions {
		if err := c.applyChild(ctx, parent, a); err != nil {
			if apierrors.IsInvalid(err) {
				invalid++
			}
			errs = append(errs, fmt.Errorf("%s %s %s: %w", a.op, a.kind.Kind, Key{a.obj.GetNamespace(), a.obj.GetName()}, err))
		}
	}
	if invalid > 0 && invalid == len(errs) {
		// The server found the children themselves invalid (422): writing
		// them again gives the same answer until the plugin's output
		// changes, so the failure is terminal like any invalid child.
		return fmt.Errorf("%w: %w", ErrInvalidChild, errors.Join(errs...))
	}
	return errors.Join(errs...)
}

func (c *Controller) applyChild(ctx context.Context, parent *unstructured.Unstructured, a action) error {
	cl := c.opts.Client
	switch a.op {
	case opCreate:
		_, err := cl.Create(ctx, a.kind.Resource, a.obj, metav1.CreateOptions{FieldManager: c.opts.FieldManager})
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// The cache has not seen it yet, or someone else holds the name.
		return c.updateFresh(ctx, parent, a)
	case opUpdate:
		_, err := cl.Update(ctx, a.kind.Resource, a.obj, metav1.UpdateOptions{FieldManager: c.opts.FieldManager})
		if !apierrors.IsConflict(err) {
			return err
		}
		return c.updateFresh(ctx, parent, a)
	case opDelete:
		err := c.deleteChild(ctx, a.kind, a.obj)
		if !apierrors.IsConflict(err) {
			return err
		}
		// The child changed since the cache saw it: it may have another
		// controller now.
		return c.deleteFresh(ctx, parent, a)
	}
	return fmt.Errorf("unknown op %v", a.op)
}

// deleteChild deletes the child seen as obj, only if it is still that
// version: the decision to delete was taken on it (its controller
// reference), so the delete is a compare-and-swap on its UID and
// resourceVersion. A child already gone is not an error.
func (c *Controller) deleteChild(ctx context.Context, kind Kind, obj *unstructured.Unstructured) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := c.opts.Client.Delete(ctx, kind.Resource, obj.GetNamespace(), obj.GetName(), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// deleteFresh reads a child that is not desired again and deletes it if
// parent still controls it; a child someone else took over, or released, is
// left alone. The child's change also reconciles parent again.
func (c *Controller) deleteFresh(ctx context.Context, parent *unstructured.Unstructured, a action) error {
	cur, err := c.opts.Client.Get(ctx, a.kind.Resource, a.obj.GetNamespace(), a.obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ref, ok := controllerOf(cur); !ok || ref.UID != parent.GetUID() {
		return nil
	}
	return c.deleteChild(ctx, a.kind, cur)
}

// updateFresh reads a child again and updates it if this object controls it
// and it is not up to date.
func (c *Controller) updateFresh(ctx context.Context, parent *unstructured.Unstructured, a action) error {
	cl := c.opts.Client
	cur, err := cl.Get(ctx, a.kind.Resource, a.obj.GetNamespace(), a.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if ref, ok := controllerOf(cur); !ok || ref.UID != parent.GetUID() {
		return ErrNotControlled
	}
	if childUpToDate(cur, a.want, parent.GetUID()) {
		return nil
	}
	_, err = cl.Update(ctx, a.kind.Resource, mergeChild(cur, a.want, controllerRef(parent)), metav1.UpdateOptions{FieldManager: c.opts.FieldManager})
	return err
}
