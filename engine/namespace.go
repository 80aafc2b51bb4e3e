package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// namespaceHooks gives namespaces their phase and protects the default one.
type namespaceHooks struct{}

func (namespaceHooks) prepare(_ context.Context, _ *Service, obj, old map[string]any) error {
	kinds.SetNamespaceNameLabel(obj)
	if old == nil {
		return unstructured.SetNestedField(obj, string(corev1.NamespaceActive), "status", "phase")
	}
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
	opts := store.ListOptions{Limit: 1000}
	for {
		res, err := s.store.List(ctx, store.ResourcePrefix("", kinds.NamespaceResource.Resource, ""), opts)
		if err != nil {
			return err
		}
		for i := range res.Items {
			kv := &res.Items[i]
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
		if res.Continue == "" {
			return nil
		}
		opts.Continue = res.Continue
	}
}

// committed does nothing: the collector learns of a namespace's deletion
// from the store's watch and empties it.
func (namespaceHooks) committed(context.Context, *Service, map[string]any, map[string]any) {}

func (namespaceHooks) deleting(_ context.Context, _ *Service, obj map[string]any, _ bool) error {
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	if name == kinds.DefaultNamespace {
		return apierrors.NewForbidden(kinds.NamespaceResource.GroupResource(), name, fmt.Errorf("this namespace may not be deleted"))
	}
	return nil
}
