package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

func (s *Service) scaleResource(gvr schema.GroupVersionResource, namespace string) (*kinds.Kind, error) {
	sv, err := s.lookup(gvr, namespace, false)
	if err != nil {
		return nil, err
	}
	if !sv.ServesScale() {
		return nil, notServed(gvr)
	}
	return sv, nil
}

// GetScale returns the autoscaling/v1 Scale of an object whose kind declares
// the scale subresource.
func (s *Service) GetScale(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	sv, err := s.scaleResource(gvr, namespace)
	if err != nil {
		return nil, err
	}
	obj, err := s.Get(ctx, gvr, namespace, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return sv.ScaleOf(obj), nil
}

// UpdateScale sets the replicas of an object from an autoscaling/v1 Scale.
// A resourceVersion in the Scale is a precondition.
func (s *Service) UpdateScale(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, scale *unstructured.Unstructured, opts metav1.UpdateOptions) (out *unstructured.Unstructured, err error) {
	if u := s.auditUser(ctx); u != nil {
		done := s.audit(ctx, u, "update", gvr, namespace, name, "scale", auditObject(scale))
		defer func() { done(auditObject(out), err) }()
	}
	return s.updateScale(ctx, gvr, namespace, name, scale, opts)
}

// updateScale is UpdateScale, unaudited: the write of a patch to /scale,
// audited as the patch.
func (s *Service) updateScale(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, scale *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	sv, err := s.scaleResource(gvr, namespace)
	if err != nil {
		return nil, err
	}
	replicas, found, err := unstructured.NestedInt64(scale.Object, "spec", "replicas")
	if err != nil || !found {
		return nil, apierrors.NewBadRequest("spec.replicas of the Scale must be an integer")
	}
	kv, err := s.store.Get(ctx, key(sv, namespace, name), store.GetOptions{})
	if err != nil {
		return nil, storeError(err, gvr.GroupResource(), name)
	}
	old, err := sv.Decode(kv)
	if err != nil {
		return nil, err
	}
	if rv := scale.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
		return nil, apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf("%s", conflictMessage))
	}
	obj := old.DeepCopy()
	if err := sv.SetScaleReplicas(obj, replicas); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	// Recorded in managedFields as kube-apiserver records a write through
	// /scale: an Update with the subresource "scale". The update pipeline
	// then takes the managedFields as set (as it does an apply's: tracked).
	obj = sv.TrackUpdate("scale", old, obj, opts.FieldManager, false)
	out, _, err := s.writeUpdate(ctx, storedUpdate{kind: sv, stored: kv, old: old, obj: obj, opts: opts, fields: tracked})
	if err != nil {
		return nil, err
	}
	return sv.ScaleOf(out), nil
}

func (s *Service) patchScale(ctx context.Context, sv *kinds.Kind, namespace, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*unstructured.Unstructured, error) {
	cur, err := s.GetScale(ctx, sv.GVR, namespace, name)
	if err != nil {
		return nil, err
	}
	patched, err := applyPatch(sv, cur, pt, data, s.maxPatchedBytes())
	if err != nil {
		return nil, err
	}
	return s.updateScale(ctx, sv.GVR, namespace, name, patched, metav1.UpdateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager})
}
