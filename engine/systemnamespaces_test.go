package engine

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// TestSystemNamespaces: the server starts with the namespaces
// kube-apiserver creates (default, kube-system, kube-public,
// kube-node-lease), Active and labelled; it refuses to delete those
// Kubernetes refuses to (default, kube-system, kube-public), dry run or
// not, with Kubernetes' 403; kube-node-lease may be deleted. A data
// directory written without them (by an older version) has them once the
// server starts on it again.
func TestSystemNamespaces(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, db := openService(t, dir)
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		ns, err := s.Get(ctx, kinds.NamespaceResource, "", name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("namespace %s: %v", name, err)
		}
		if phase, _, _ := unstructured.NestedString(ns.Object, "status", "phase"); phase != "Active" || ns.GetLabels()["kubernetes.io/metadata.name"] != name {
			t.Errorf("namespace %s: phase %q, labels %v", name, phase, ns.GetLabels())
		}
	}
	for _, name := range []string{"default", "kube-system", "kube-public"} {
		for _, dry := range [][]string{{metav1.DryRunAll}, nil} {
			err := s.Delete(ctx, kinds.NamespaceResource, "", name, metav1.DeleteOptions{DryRun: dry})
			if !apierrors.IsForbidden(err) || err.Error() != `namespaces "`+name+`" is forbidden: this namespace may not be deleted` {
				t.Errorf("delete namespace %s (dryRun %v): err = %v, want 403 this namespace may not be deleted", name, dry, err)
			}
		}
	}
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "kube-node-lease", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete namespace kube-node-lease: %v", err)
	}

	// As an older version left it: without kube-system and kube-public.
	for _, name := range []string{"kube-system", "kube-public"} {
		kv, err := db.Get(ctx, store.ObjectKey("", "namespaces", "", name), store.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.Delete(ctx, kv.Key, kv.ModRevision); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	db.Close()
	s, _ = openService(t, dir)
	for _, name := range []string{"kube-system", "kube-public"} {
		if _, err := s.Get(ctx, kinds.NamespaceResource, "", name, metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s after a restart on a data directory without it: %v", name, err)
		}
	}
	// kube-node-lease, Terminating, is left to its deletion.
	ns, err := s.Get(ctx, kinds.NamespaceResource, "", "kube-node-lease", metav1.GetOptions{})
	if err != nil || ns.GetDeletionTimestamp() == nil {
		t.Errorf("kube-node-lease after the restart: %v, err %v; want it still Terminating", ns, err)
	}
}
