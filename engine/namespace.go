package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// namespaceHooks gives namespaces their phase and finalizers and protects
// the default one.
type namespaceHooks struct{}

// prepare sets what Kubernetes' namespace strategy sets: on create the
// phase Active and the finalizer kubernetes in spec.finalizers (added to
// those the client gave); on update spec.finalizers as it was, which only
// the namespace's lifecycle changes. The namespace's content is emptied,
// once it is deleted, by the garbage collector, held by the same finalizer
// in metadata.finalizers (the object service's deletion).
func (namespaceHooks) prepare(_ context.Context, _ *Service, obj, old map[string]any) error {
	kinds.SetNamespaceNameLabel(obj)
	if old == nil {
		fins, _, err := unstructured.NestedStringSlice(obj, "spec", "finalizers")
		if err != nil {
			return fmt.Errorf("spec.finalizers: %w", err)
		}
		if !slices.Contains(fins, string(corev1.FinalizerKubernetes)) {
			if err := unstructured.SetNestedStringSlice(obj, append(fins, string(corev1.FinalizerKubernetes)), "spec", "finalizers"); err != nil {
				return err
			}
		}
		return unstructured.SetNestedField(obj, string(corev1.NamespaceActive), "status", "phase")
	}
	if fins, ok, _ := unstructured.NestedFieldCopy(old, "spec", "finalizers"); ok {
		return unstructured.SetNestedField(obj, fins, "spec", "finalizers")
	}
	unstructured.RemoveNestedField(obj, "spec", "finalizers")
	return nil
}

// labelNamespaces gives the stored namespaces that lack it (written before
// Setpoint set it) the label kubernetes.io/metadata.name, with a direct
// store write: no admission, no managedFields entry, as for a default
// applied on read. A namespace written meanwhile (a conflict) went through
// prepare and has it.
func (s *Service) labelNamespaces(ctx context.Context) error {
	sv, ok := s.reg.Get(kinds.NamespaceResource)
	if !ok {
		return nil
	}
	prefix := store.ResourcePrefix("", kinds.NamespaceResource.Resource, "")
	_, err := store.ListPages(ctx, s.store, prefix, store.ListOptions{Limit: 1000}, func(items []store.KeyValue) error {
		for i := range items {
			kv := &items[i]
			u, err := sv.Decode(kv)
			if err != nil || !kinds.SetNamespaceNameLabel(u.Object) {
				continue
			}
			b, err := sv.Encode(u)
			if err != nil {
				return err
			}
			if _, err := s.store.Update(ctx, kv.Key, b, kv.ModRevision); err != nil &&
				!errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	return err
}

// committed tells the namespace cache at once of a namespace that this
// server marked deleted or deleted, ahead of the store's watch. The
// collector learns of a namespace's deletion from the watch and empties it.
func (namespaceHooks) committed(_ context.Context, s *Service, obj, old map[string]any) {
	switch {
	case obj == nil && old != nil:
		name, _, _ := unstructured.NestedString(old, "metadata", "name")
		s.namespaces.markInactive(name, namespaceRevision(old))
	case obj != nil:
		if ts, ok, _ := unstructured.NestedFieldNoCopy(obj, "metadata", "deletionTimestamp"); ok && ts != nil {
			name, _, _ := unstructured.NestedString(obj, "metadata", "name")
			s.namespaces.markInactive(name, namespaceRevision(obj))
		}
	}
}

// deleting refuses to delete the default namespace. Otherwise, from now on
// for namespaceLiveLookup, creates in the namespace read it from the store
// (checkNamespace), whatever the cache says, so that none is admitted in a
// namespace this server is deleting from a cache that has not seen it yet.
func (namespaceHooks) deleting(_ context.Context, s *Service, obj map[string]any, dryRun bool) error {
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	if name == kinds.DefaultNamespace {
		return apierrors.NewForbidden(kinds.NamespaceResource.GroupResource(), name, fmt.Errorf("this namespace may not be deleted"))
	}
	if !dryRun {
		s.namespaces.lookLive(name, s.opts.Now())
	}
	return nil
}
