package engine

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// The methods here are what a garbage collector (package engine/gc) needs of
// the Service beyond its REST verbs: which resources to walk, and the few
// writes no client may make (finishing a deletion cut short, purging the
// objects of a kind no longer served). A collector reads the store itself,
// through the store contract, and writes through the Service.

// GroupResources returns one served version of every served group/resource,
// sorted by GroupVersionResource string: what a walk over every stored
// object lists.
func (s *Service) GroupResources() []kinds.Resource {
	svs := s.reg.GroupResources()
	out := make([]kinds.Resource, len(svs))
	for i, sv := range svs {
		out[i] = sv.Resource
	}
	return out
}

// ServedResource returns the version of gr that GroupResources lists (the
// first served one by GroupVersionResource string); false when gr is not
// served.
func (s *Service) ServedResource(gr schema.GroupResource) (kinds.Resource, bool) {
	sv := s.reg.ByGroupResource(gr)
	if sv == nil {
		return kinds.Resource{}, false
	}
	return sv.Resource, true
}

// FinishDeletion deletes the object uid of gvr when it is still deleting
// with no finalizer left (for a namespace, in spec.finalizers neither), and
// reports whether it did. The write that removes
// an object's last finalizer normally deletes it at once; a crash between
// that write and its delete leaves the object so. The delete is conditional
// on the revision read, so a write that adds a finalizer meanwhile keeps the
// object; an object that is gone, or is another one now, is left alone.
func (s *Service) FinishDeletion(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, uid types.UID) (bool, error) {
	sv, err := s.lookup(gvr, namespace, false)
	if err != nil {
		return false, err
	}
	k := key(sv, namespace, name)
	kv, err := s.store.Get(ctx, k, store.GetOptions{})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return false, storeError(err, sv.GVR.GroupResource(), name)
	}
	obj, err := sv.Decode(kv)
	if err != nil {
		return false, err
	}
	if obj.GetUID() != uid || !finalized(sv, obj) {
		return false, nil
	}
	// Audited once there is something to delete: a delete with the uid
	// as its precondition.
	done := noAudit
	if u := s.auditUser(ctx); u != nil {
		done = s.audit(ctx, u, "delete", gvr, namespace, name, "", deleteOptionsObject(metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(uid))}))
	}
	if _, _, err := s.store.Delete(ctx, k, kv.ModRevision); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			done(nil, apierrors.NewNotFound(gvr.GroupResource(), name))
			return false, nil
		}
		err = storeError(err, sv.GVR.GroupResource(), name)
		done(nil, err)
		return false, err
	}
	done(auditObject(obj), nil)
	if h := hooksOf(sv); h != nil {
		h.committed(ctx, s, nil, obj.Object)
	}
	return true, nil
}

// PurgeResource removes every stored object of gr, bypassing the write
// pipeline: no admission, no finalizers, no watch event decoded by kind.
// It is for the objects of a CustomResourceDefinition being deleted whose
// kind is not served (never was, or no longer can be), which no request can
// reach.
func (s *Service) PurgeResource(ctx context.Context, gr schema.GroupResource) (err error) {
	if u := s.auditUser(ctx); u != nil {
		done := s.audit(ctx, u, "deletecollection", gr.WithVersion(""), "", "", "", nil)
		defer func() { done(nil, err) }()
	}
	return s.purgeResource(ctx, gr.Group, gr.Resource)
}
