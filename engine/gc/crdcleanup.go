package gc

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// Deleting a CRD works as in Kubernetes. Service.DeleteObject gives it a
// deletionTimestamp, the cleanup finalizer and the condition Terminating
// (InstanceDeletionPending); its kind stays served, terminating: reads,
// updates (finalizer removal), deletes and watches work, creates are
// refused. The collector then deletes the kind's objects as a
// client would (objects with finalizers wait for them), attempting again as
// their deletes show in its graph, and, once none is left in the store, sets
// Terminating to False (InstanceDeletionCompleted) and removes the
// finalizer, which deletes the CRD and stops serving the kind. The safety-net
// sweep does the same for every terminating CRD it finds.

// cleanupCRDs runs the cleanup of every CRD being deleted among the objects
// of a sweep, and reports whether it changed anything.
func (c *Collector) cleanupCRDs(ctx context.Context, all []*gcObject) bool {
	byGR := map[schema.GroupResource][]*gcObject{}
	var crds []*gcObject
	for _, o := range all {
		switch {
		case o.res.GVR == kinds.CRDResource:
			if o.obj.GetDeletionTimestamp() != nil && slices.Contains(o.obj.GetFinalizers(), apiextensionsv1.CustomResourceCleanupFinalizer) {
				crds = append(crds, o)
			}
		case o.res.CRD != "":
			gr := o.res.GVR.GroupResource()
			byGR[gr] = append(byGR[gr], o)
		}
	}
	changed := false
	for _, crd := range crds {
		ch, err := c.cleanupCRD(ctx, crd, func(_ context.Context, gr schema.GroupResource) ([]*gcObject, error) { return byGR[gr], nil })
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			c.log.Warn("custom resource cleanup", "crd", crd.obj.GetName(), "err", err)
		}
		changed = changed || ch || apierrors.IsConflict(err)
	}
	return changed
}

// cleanupCRD deletes the objects of the CRD o, which objsOf returns, or
// removes its finalizer when none is left.
func (c *Collector) cleanupCRD(ctx context.Context, o *gcObject, objsOf func(context.Context, schema.GroupResource) ([]*gcObject, error)) (bool, error) {
	// The collector knows metadata only: read the whole CRD.
	cur, err := c.svc.Get(ctx, kinds.CRDResource, "", o.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if cur.GetUID() != o.obj.GetUID() {
		return false, nil
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.Object, crd); err != nil {
		return false, fmt.Errorf("decode CustomResourceDefinition: %w", err)
	}
	plural := crd.Status.AcceptedNames.Plural
	if plural == "" {
		plural = crd.Spec.Names.Plural
	}
	gr := schema.GroupResource{Group: crd.Spec.Group, Resource: plural}
	if !c.servesCRD(crd.Name) {
		// Never served (or no longer servable): its objects cannot be
		// reached through the API, finalizers included.
		if err := c.svc.PurgeResource(ctx, gr); err != nil {
			return false, err
		}
	}
	objs, err := objsOf(ctx, gr)
	if err != nil {
		return false, err
	}
	if len(objs) > 0 {
		if cond := apihelpers.FindCRDCondition(crd, apiextensionsv1.Terminating); cond == nil || cond.Reason != "InstanceDeletionInProgress" {
			if err := c.setCRDTerminating(ctx, o, apiextensionsv1.ConditionTrue, "InstanceDeletionInProgress", "CustomResource deletion is in progress"); err != nil {
				return false, err
			}
		}
		background := metav1.DeletePropagationBackground
		deleted := false
		for _, x := range objs {
			if x.obj.GetDeletionTimestamp() != nil {
				continue // waiting for its finalizers
			}
			uid := x.obj.GetUID()
			_, _, err := c.svc.DeleteObject(ctx, x.res.GVR, x.obj.GetNamespace(), x.obj.GetName(), metav1.DeleteOptions{
				PropagationPolicy: &background,
				Preconditions:     &metav1.Preconditions{UID: &uid},
			})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return deleted, err
			}
			deleted = true
		}
		return deleted, nil
	}
	// None seen: check the store itself, since objects may
	// have been created (by another server not yet aware of the deletion)
	// after they were listed.
	res, err := c.st.List(ctx, store.ResourcePrefix(gr.Group, gr.Resource, ""), store.ListOptions{Limit: 1})
	if err != nil {
		return false, storeError(err, gr, "")
	}
	if len(res.Items) > 0 {
		return true, nil
	}
	if err := c.setCRDTerminating(ctx, o, apiextensionsv1.ConditionFalse, "InstanceDeletionCompleted", "removed all instances"); err != nil {
		return false, err
	}
	return true, c.removeFinalizer(ctx, o, apiextensionsv1.CustomResourceCleanupFinalizer)
}

// servesCRD tells whether the Service serves a resource of the CRD name.
func (c *Collector) servesCRD(name string) bool {
	for _, r := range c.svc.GroupResources() {
		if r.CRD == name {
			return true
		}
	}
	return false
}

// setCRDTerminating sets the Terminating condition of the stored CRD o.
func (c *Collector) setCRDTerminating(ctx context.Context, o *gcObject, status apiextensionsv1.ConditionStatus, reason, message string) error {
	cond := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: status, Reason: reason, Message: message}
	return c.svc.SetCRDCondition(ctx, o.obj.GetName(), o.obj.GetUID(), cond, metav1.UpdateOptions{FieldManager: FieldManager})
}
