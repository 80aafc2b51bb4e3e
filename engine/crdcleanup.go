package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// Deleting a CRD works as in Kubernetes. DeleteObject gives it a
// deletionTimestamp, the cleanup finalizer and the condition Terminating
// (InstanceDeletionPending); its kind stays served, terminating: reads,
// updates (finalizer removal), deletes and watches work, creates are
// refused. The garbage collector then deletes the kind's objects as a
// client would (objects with finalizers wait for them), attempting again as
// their deletes show in its graph, and, once none is left in the store, sets
// Terminating to False (InstanceDeletionCompleted) and removes the
// finalizer, which deletes the CRD and stops serving the kind. The safety-net
// sweep does the same for every terminating CRD it finds.

// cleanupCRDs runs the cleanup of every CRD being deleted among the objects
// of a sweep, and reports whether it changed anything.
func (s *Service) cleanupCRDs(ctx context.Context, all []*gcObject) bool {
	byGR := map[schema.GroupResource][]*gcObject{}
	var crds []*gcObject
	for _, o := range all {
		switch {
		case o.sv.GVR == kinds.CRDResource:
			if o.obj.GetDeletionTimestamp() != nil && slices.Contains(o.obj.GetFinalizers(), apiextensionsv1.CustomResourceCleanupFinalizer) {
				crds = append(crds, o)
			}
		case o.sv.CRD != "":
			gr := o.sv.GVR.GroupResource()
			byGR[gr] = append(byGR[gr], o)
		}
	}
	changed := false
	for _, c := range crds {
		ch, err := s.cleanupCRD(ctx, c, func(_ context.Context, gr schema.GroupResource) ([]*gcObject, error) { return byGR[gr], nil })
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.log.Warn("custom resource cleanup", "crd", c.obj.GetName(), "err", err)
		}
		changed = changed || ch || apierrors.IsConflict(err)
	}
	return changed
}

// cleanupCRD deletes the objects of the CRD c, which objsOf returns, or
// removes its finalizer when none is left.
func (s *Service) cleanupCRD(ctx context.Context, c *gcObject, objsOf func(context.Context, schema.GroupResource) ([]*gcObject, error)) (bool, error) {
	// The collector knows metadata only: read the whole CRD.
	cur, err := s.Get(ctx, kinds.CRDResource, "", c.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if cur.GetUID() != c.obj.GetUID() {
		return false, nil
	}
	crd, err := kinds.CRDFromMap(cur.Object)
	if err != nil {
		return false, err
	}
	plural := crd.Status.AcceptedNames.Plural
	if plural == "" {
		plural = crd.Spec.Names.Plural
	}
	gr := schema.GroupResource{Group: crd.Spec.Group, Resource: plural}
	if !s.servesCRD(crd.Name) {
		// Never served (or no longer servable): its objects cannot be
		// reached through the API, finalizers included.
		if err := s.purgeResource(ctx, gr.Group, gr.Resource); err != nil {
			return false, err
		}
	}
	objs, err := objsOf(ctx, gr)
	if err != nil {
		return false, err
	}
	if len(objs) > 0 {
		if cond := apihelpers.FindCRDCondition(crd, apiextensionsv1.Terminating); cond == nil || cond.Reason != "InstanceDeletionInProgress" {
			if err := s.setCRDTerminating(ctx, c, apiextensionsv1.ConditionTrue, "InstanceDeletionInProgress", "CustomResource deletion is in progress"); err != nil {
				return false, err
			}
		}
		background := metav1.DeletePropagationBackground
		deleted := false
		for _, o := range objs {
			if o.obj.GetDeletionTimestamp() != nil {
				continue // waiting for its finalizers
			}
			uid := o.obj.GetUID()
			_, _, err := s.DeleteObject(ctx, o.sv.GVR, o.obj.GetNamespace(), o.obj.GetName(), metav1.DeleteOptions{
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
	res, err := s.store.List(ctx, store.ResourcePrefix(gr.Group, gr.Resource, ""), store.ListOptions{Limit: 1})
	if err != nil {
		return false, storeError(err, gr, "")
	}
	if len(res.Items) > 0 {
		return true, nil
	}
	if err := s.setCRDTerminating(ctx, c, apiextensionsv1.ConditionFalse, "InstanceDeletionCompleted", "removed all instances"); err != nil {
		return false, err
	}
	return true, s.removeFinalizer(ctx, c, apiextensionsv1.CustomResourceCleanupFinalizer)
}

// servesCRD tells whether the registry serves a resource of the CRD name.
func (s *Service) servesCRD(name string) bool {
	return s.reg.ServesCRD(name)
}

// setCRDTerminating sets the Terminating condition of the stored CRD c
// through its status, retrying conflicts.
func (s *Service) setCRDTerminating(ctx context.Context, c *gcObject, status apiextensionsv1.ConditionStatus, reason, message string) error {
	for attempt := 1; ; attempt++ {
		cur, err := s.Get(ctx, kinds.CRDResource, "", c.obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.GetUID() != c.obj.GetUID() {
			return nil
		}
		if err := setCRDCondition(cur.Object, apiextensionsv1.Terminating, status, reason, message, s.opts.Now()); err != nil {
			return apierrors.NewInternalError(err)
		}
		_, err = s.UpdateStatus(ctx, kinds.CRDResource, cur, metav1.UpdateOptions{FieldManager: gcFieldManager})
		if apierrors.IsConflict(err) && attempt < maxPatchAttempts {
			continue
		}
		return err
	}
}

// setCRDCondition sets a condition in a CRD's status.conditions, keeping its
// lastTransitionTime when its status does not change.
func setCRDCondition(obj map[string]any, typ apiextensionsv1.CustomResourceDefinitionConditionType, status apiextensionsv1.ConditionStatus, reason, message string, now time.Time) error {
	conds, _, err := unstructured.NestedSlice(obj, "status", "conditions")
	if err != nil {
		return fmt.Errorf("status.conditions: %w", err)
	}
	c := map[string]any{
		"type": string(typ), "status": string(status), "reason": reason, "message": message,
		"lastTransitionTime": now.UTC().Format(time.RFC3339),
	}
	for i, x := range conds {
		m, ok := x.(map[string]any)
		if !ok || m["type"] != string(typ) {
			continue
		}
		if lt, ok := m["lastTransitionTime"]; ok && m["status"] == string(status) {
			c["lastTransitionTime"] = lt
		}
		conds[i] = c
		return unstructured.SetNestedSlice(obj, conds, "status", "conditions")
	}
	return unstructured.SetNestedSlice(obj, append(conds, c), "status", "conditions")
}
