package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// Delete deletes an object, honouring preconditions (uid, resourceVersion:
// 409 Conflict on mismatch), finalizers (the object gets a deletionTimestamp
// and stays until they are removed) and the propagation policy: Background
// (the default: the garbage collector deletes dependents afterwards),
// Foreground (the object waits with the foregroundDeletion finalizer until
// its blocking dependents are gone) or Orphan (dependents lose their owner
// reference).
func (s *Service) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	_, _, err := s.DeleteObject(ctx, gvr, namespace, name, opts)
	return err
}

// DeleteObject is Delete returning the object: as it was when it was removed
// (deleted true), or as it is now, waiting for finalizers (deleted false).
func (s *Service) DeleteObject(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) (obj *unstructured.Unstructured, deleted bool, err error) {
	if u := s.auditUser(ctx); u != nil {
		done := s.audit(ctx, u, "delete", gvr, namespace, name, "", deleteOptionsObject(opts))
		defer func() { done(auditObject(obj), err) }()
	}
	return s.deleteObject(ctx, gvr, namespace, name, opts)
}

// deleteObject is DeleteObject, unaudited: a delete of DeleteCollection,
// audited as the collection's.
func (s *Service) deleteObject(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) (*unstructured.Unstructured, bool, error) {
	sv, err := s.lookup(gvr, namespace, false)
	if err != nil {
		return nil, false, err
	}
	if err := validDeleteOptions(&opts); err != nil {
		return nil, false, err
	}
	dry := len(opts.DryRun) > 0
	policy := metav1.DeletePropagationBackground
	if opts.OrphanDependents != nil && *opts.OrphanDependents {
		policy = metav1.DeletePropagationOrphan
	}
	if opts.PropagationPolicy != nil {
		policy = *opts.PropagationPolicy
	}
	gr := gvr.GroupResource()
	k := key(sv, namespace, name)
	for attempt := 1; ; attempt++ {
		kv, err := s.store.Get(ctx, k, store.GetOptions{})
		if err != nil {
			return nil, false, storeError(err, gr, name)
		}
		cur, err := sv.Decode(kv)
		if err != nil {
			return nil, false, err
		}
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != cur.GetUID() {
				return nil, false, apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, cur.GetUID()))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
				return nil, false, apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *p.ResourceVersion, cur.GetResourceVersion()))
			}
		}
		req := newAdmissionRequest(ctx, OpDelete, sv, "", nil, cur, dry)
		if err := s.validateAdmission(ctx, req); err != nil {
			return nil, false, err
		}
		if h := hooksOf(sv); h != nil {
			if err := h.deleting(ctx, s, cur.Object, dry); err != nil {
				return nil, false, err
			}
		}
		upd := cur.DeepCopy()
		// mark keeps the object, marked deleted, whatever its finalizers.
		mark := false
		switch gvr {
		case kinds.NamespaceResource:
			var held bool
			if mark, held, err = deleteNamespace(cur, upd, opts); err != nil {
				return nil, false, apierrors.NewInternalError(err)
			}
			if held {
				return cur, false, nil // spec.finalizers hold it
			}
		}
		fins := upd.GetFinalizers()
		// crdFirst is the first delete of a CRD, which kube-apiserver's
		// CRD storage does itself, not its generic registry: it marks
		// the CRD deleted with its cleanup finalizer and sets neither a
		// grace period nor the propagation policy's finalizer. A delete
		// of a CRD already marked goes through the registry, as any
		// other object's does.
		crdFirst := gvr == kinds.CRDResource && cur.GetDeletionTimestamp() == nil
		if crdFirst {
			fins = addFinalizer(fins, apiextensionsv1.CustomResourceCleanupFinalizer)
			if err := setCRDCondition(upd.Object, apiextensionsv1.Terminating, apiextensionsv1.ConditionTrue, "InstanceDeletionPending",
				"CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon", s.opts.Now()); err != nil {
				return nil, false, apierrors.NewInternalError(err)
			}
		}
		switch {
		case mark, crdFirst:
		case policy == metav1.DeletePropagationOrphan:
			fins = addFinalizer(fins, metav1.FinalizerOrphanDependents)
			fins = slices.DeleteFunc(fins, func(f string) bool { return f == metav1.FinalizerDeleteDependents })
		case policy == metav1.DeletePropagationForeground:
			fins = addFinalizer(fins, metav1.FinalizerDeleteDependents)
			fins = slices.DeleteFunc(fins, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
		}
		if len(fins) == 0 && !mark {
			if dry {
				return cur, true, nil
			}
			_, rev, err := s.store.Delete(ctx, k, kv.ModRevision)
			if errors.Is(err, store.ErrConflict) && attempt < maxPatchAttempts {
				continue
			}
			if err != nil {
				return nil, false, storeError(err, gr, name)
			}
			cur.SetResourceVersion(fmt.Sprint(rev))
			if h := hooksOf(sv); h != nil {
				h.committed(ctx, s, nil, cur.Object)
			}
			return cur, true, nil
		}
		// The registry gives an object marked deleted without a grace
		// period (a CRD marked by its storage) a grace period of 0.
		graceless := !mark && upd.GetDeletionTimestamp() != nil && upd.GetDeletionGracePeriodSeconds() == nil
		if cur.GetDeletionTimestamp() != nil && slices.Equal(fins, cur.GetFinalizers()) && !graceless {
			return cur, false, nil // already waiting for its finalizers
		}
		upd.SetFinalizers(fins)
		if graceless {
			zero := int64(0)
			upd.SetDeletionGracePeriodSeconds(&zero)
		}
		if upd.GetDeletionTimestamp() == nil {
			now := metav1.NewTime(s.opts.Now())
			upd.SetDeletionTimestamp(&now)
			if !mark && !crdFirst { // Kubernetes' namespace deletion sets no grace period
				zero := int64(0)
				upd.SetDeletionGracePeriodSeconds(&zero)
				// Marking it deleted changes what the object is to do:
				// as Kubernetes' registry does, it counts as a new
				// generation where the kind counts them (a CRD, whose
				// storage marks it without the registry, is crdFirst here).
				if g := upd.GetGeneration(); g > 0 {
					upd.SetGeneration(g + 1)
				}
			}
		}
		if dry {
			// Answered as the write would be, with the stored
			// resourceVersion, as Kubernetes' dry-run update answers.
			return upd, false, nil
		}
		b, err := sv.Encode(upd)
		if err != nil {
			return nil, false, err
		}
		rev, err := s.store.Update(ctx, k, b, kv.ModRevision)
		if err == nil {
			s.noteWrite(ctx, sv, rev)
		}
		if errors.Is(err, store.ErrConflict) && attempt < maxPatchAttempts {
			continue
		}
		if err != nil {
			return nil, false, storeError(err, gr, name)
		}
		upd.SetResourceVersion(fmt.Sprint(rev))
		if h := hooksOf(sv); h != nil {
			h.committed(ctx, s, upd.Object, cur.Object)
		}
		return upd, false, nil
	}
}

func addFinalizer(fins []string, f string) []string {
	if slices.Contains(fins, f) {
		return fins
	}
	return append(slices.Clone(fins), f)
}

// DeleteCollection deletes every object the list options select and returns
// them as deleted or as waiting for finalizers.
func (s *Service) DeleteCollection(ctx context.Context, gvr schema.GroupVersionResource, namespace string, del metav1.DeleteOptions, list metav1.ListOptions) (deleted *unstructured.UnstructuredList, err error) {
	if u := s.auditUser(ctx); u != nil {
		done := s.audit(ctx, u, "deletecollection", gvr, namespace, "", "", deleteOptionsObject(del))
		defer func() {
			var out runtime.Object
			if deleted != nil {
				out = deleted
			}
			done(out, err)
		}()
	}
	if err := validDeleteOptions(&del); err != nil {
		return nil, err
	}
	if gvr == kinds.NamespaceResource {
		// Kubernetes serves no deletecollection for namespaces: its router
		// answers the method with this 405.
		return nil, apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, "", schema.GroupResource{}, "", "405: Method Not Allowed", 0, false)
	}
	l, err := s.List(ctx, gvr, namespace, list)
	if err != nil {
		return nil, err
	}
	out := &unstructured.UnstructuredList{Object: l.Object}
	for i := range l.Items {
		it := &l.Items[i]
		obj, _, err := s.deleteObject(ctx, gvr, it.GetNamespace(), it.GetName(), del)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, *obj)
	}
	return out, nil
}

// purgeResource removes every stored object of a group/resource, bypassing
// finalizers: what deleting a CRD does to objects of a kind it never served
// (or can no longer serve), which the API cannot reach.
func (s *Service) purgeResource(ctx context.Context, group, resource string) error {
	prefix := store.ResourcePrefix(group, resource, "")
	for {
		res, err := s.store.List(ctx, prefix, store.ListOptions{Limit: 500})
		if err != nil {
			return storeError(err, schema.GroupResource{Group: group, Resource: resource}, "")
		}
		for _, kv := range res.Items {
			if _, _, err := s.store.Delete(ctx, kv.Key, 0); err != nil && !errors.Is(err, store.ErrNotFound) {
				return storeError(err, schema.GroupResource{Group: group, Resource: resource}, kv.Key)
			}
		}
		if len(res.Items) == 0 || res.Continue == "" {
			return nil
		}
	}
}

// validDeleteOptions refuses options kube-apiserver's delete handlers
// refuse, with their 422: an unknown propagationPolicy, one set together
// with orphanDependents, a dryRun value other than All.
func validDeleteOptions(opts *metav1.DeleteOptions) error {
	return invalidOptions("DeleteOptions", metav1validation.ValidateDeleteOptions(opts))
}
