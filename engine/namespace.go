package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// namespaceHooks gives namespaces their phase and finalizers and protects
// the system ones.
type namespaceHooks struct{}

// prepare sets what Kubernetes' namespace strategy sets: on create the
// phase Active and the finalizer kubernetes in spec.finalizers (added to
// those the client gave); on an update spec.finalizers as they were, but
// through the finalize subresource, the only way to change them (the
// strategy of the subresource keeps status as it was). Once the namespace
// is deleted its spec.finalizers hold it, Terminating (see
// deleteNamespace): the garbage collector empties it and removes
// kubernetes through /finalize.
func (namespaceHooks) prepare(_ context.Context, _ *Service, sub string, obj, old map[string]any) error {
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
	if sub == "finalize" {
		// An empty list is omitted, as from Kubernetes' typed object.
		if v, ok, _ := unstructured.NestedFieldNoCopy(obj, "spec", "finalizers"); ok && (v == nil || isEmptyList(v)) {
			unstructured.RemoveNestedField(obj, "spec", "finalizers")
		}
		return nil
	}
	if fins, ok, _ := unstructured.NestedFieldCopy(old, "spec", "finalizers"); ok {
		return unstructured.SetNestedField(obj, fins, "spec", "finalizers")
	}
	unstructured.RemoveNestedField(obj, "spec", "finalizers")
	return nil
}

func isEmptyList(v any) bool {
	l, ok := v.([]any)
	return ok && len(l) == 0
}

// finalized tells whether obj, of sv's kind, is deleted and held by no
// finalizer: it is to go. A namespace is held by its spec.finalizers too.
func finalized(sv *kinds.Kind, obj *unstructured.Unstructured) bool {
	if obj.GetDeletionTimestamp() == nil || len(obj.GetFinalizers()) > 0 {
		return false
	}
	return !(sv.Builtin && sv.GVR == kinds.NamespaceResource) || len(kinds.NamespaceSpecFinalizers(obj.Object)) == 0
}

// UpdateFinalize writes the namespace obj through its finalize subresource,
// as Kubernetes' namespace finalize strategy does: what the client sent,
// spec.finalizers included (validated as finalizer names), but status as
// stored. It is how the finalizers in spec.finalizers are removed, by the
// garbage collector and by hand (kubectl replace --raw
// /api/v1/namespaces/NAME/finalize); a deleted namespace left with no
// finalizer in either list is deleted.
func (s *Service) UpdateFinalize(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	out, _, err := s.UpdateFinalizeJSON(ctx, obj, opts)
	return out, err
}

// UpdateFinalizeJSON is UpdateFinalize that also returns the object as JSON
// (see UpdateJSON).
func (s *Service) UpdateFinalizeJSON(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (out *unstructured.Unstructured, doc []byte, err error) {
	if u := s.auditUser(ctx); u != nil {
		done := s.audit(ctx, u, "update", kinds.NamespaceResource, "", nameOf(obj), "finalize", auditObject(obj))
		defer func() { done(auditObject(out), err) }()
	}
	return s.update(ctx, kinds.NamespaceResource, obj, opts, "finalize", false)
}

// deleteNamespace is what a delete of the namespace cur does, as
// Kubernetes' namespace storage does it, in upd (cur's copy, to be
// written). The first marks it deleted, status.phase Terminating, and
// keeps it whatever its finalizers (mark): only the propagation finalizers
// of metadata.finalizers change, to what opts ask for (left as they are
// when opts say nothing). Later ones change nothing while spec.finalizers
// hold it (held); once they are empty a delete is an object's ordinary
// delete.
func deleteNamespace(cur, upd *unstructured.Unstructured, opts metav1.DeleteOptions) (mark, held bool, err error) {
	if cur.GetDeletionTimestamp() != nil {
		return false, len(kinds.NamespaceSpecFinalizers(cur.Object)) > 0, nil
	}
	if err := unstructured.SetNestedField(upd.Object, string(corev1.NamespaceTerminating), "status", "phase"); err != nil {
		return false, false, err
	}
	fins := upd.GetFinalizers()
	orphan, foreground := slices.Contains(fins, metav1.FinalizerOrphanDependents), slices.Contains(fins, metav1.FinalizerDeleteDependents)
	switch {
	case opts.OrphanDependents != nil: //nolint:staticcheck // still honoured, as by Kubernetes
		orphan, foreground = *opts.OrphanDependents, !*opts.OrphanDependents //nolint:staticcheck
	case opts.PropagationPolicy != nil:
		orphan, foreground = *opts.PropagationPolicy == metav1.DeletePropagationOrphan, *opts.PropagationPolicy == metav1.DeletePropagationForeground
	}
	fins = slices.DeleteFunc(slices.Clone(fins), func(f string) bool {
		return f == metav1.FinalizerOrphanDependents && !orphan || f == metav1.FinalizerDeleteDependents && !foreground
	})
	if orphan {
		fins = addFinalizer(fins, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		fins = addFinalizer(fins, metav1.FinalizerDeleteDependents)
	}
	if len(fins) == 0 {
		fins = nil
	}
	upd.SetFinalizers(fins)
	return true, false, nil
}

// upgradeNamespaces gives the stored namespaces written before Setpoint
// set them what prepare now gives a created one: the label
// kubernetes.io/metadata.name and, to a live one, kubernetes in
// spec.finalizers (addKubernetesFinalizer). It writes the store directly:
// no admission, no managedFields entry, as for a default applied on read.
// A namespace written meanwhile (a conflict) went through prepare.
func (s *Service) upgradeNamespaces(ctx context.Context) error {
	sv, ok := s.reg.Get(kinds.NamespaceResource)
	if !ok {
		return nil
	}
	prefix := store.ResourcePrefix("", kinds.NamespaceResource.Resource, "")
	_, err := store.ListPages(ctx, s.store, prefix, store.ListOptions{Limit: 1000}, func(items []store.KeyValue) error {
		for i := range items {
			kv := &items[i]
			u, err := sv.Decode(kv)
			if err != nil {
				continue
			}
			labelled := kinds.SetNamespaceNameLabel(u.Object)
			if held := addKubernetesFinalizer(u); !labelled && !held {
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

// addKubernetesFinalizer puts kubernetes in the spec.finalizers of the
// stored namespace ns when it is live and has none, as an older Setpoint,
// which did not set them, wrote it: without it a delete would let the
// namespace go at once, before the garbage collector has emptied it, and a
// namespace created again under its name would find its content. A live
// namespace whose finalizers a client removed through /finalize looks the
// same and has kubernetes again: its delete waits for it to be emptied.
// It reports whether it changed ns.
func addKubernetesFinalizer(ns *unstructured.Unstructured) bool {
	if ns.GetDeletionTimestamp() != nil {
		return false
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(ns.Object, "spec", "finalizers"); ok {
		return false
	}
	return unstructured.SetNestedStringSlice(ns.Object, []string{string(corev1.FinalizerKubernetes)}, "spec", "finalizers") == nil
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

// systemNamespaces are the namespaces kube-apiserver creates as it starts,
// which tools expect to find (kubectl -n kube-system, leader election
// leases in kube-system, node leases in kube-node-lease). The server
// creates those missing each time it starts, so that a data directory
// written without them has them too.
var systemNamespaces = []string{kinds.DefaultNamespace, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// immortalNamespace tells whether the namespace name may not be deleted:
// those Kubernetes' NamespaceLifecycle admission protects. kube-node-lease
// may be.
func immortalNamespace(name string) bool {
	switch name {
	case kinds.DefaultNamespace, metav1.NamespaceSystem, metav1.NamespacePublic:
		return true
	}
	return false
}

// createSystemNamespaces creates the systemNamespaces that are missing.
func (s *Service) createSystemNamespaces(ctx context.Context) error {
	ctx = WithSystemUser(ctx, APIServerUser)
	for _, name := range systemNamespaces {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(name)
		if _, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("engine: create namespace %s: %w", name, err)
		}
	}
	return nil
}

// deleting refuses to delete the namespaces kube-apiserver refuses to
// (immortalNamespace), dry run or not. Otherwise, from now on
// for namespaceLiveLookup, creates in the namespace read it from the store
// (checkNamespace), whatever the cache says, so that none is admitted in a
// namespace this server is deleting from a cache that has not seen it yet.
func (namespaceHooks) deleting(_ context.Context, s *Service, obj map[string]any, dryRun bool) error {
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	if immortalNamespace(name) {
		return apierrors.NewForbidden(kinds.NamespaceResource.GroupResource(), name, fmt.Errorf("this namespace may not be deleted"))
	}
	if !dryRun {
		s.namespaces.lookLive(name, s.opts.Now())
	}
	return nil
}
