package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// TestNamespaceFinalizeSubresource: a namespace's spec.finalizers change
// only through /finalize, as in Kubernetes: names validated as its
// ValidateNamespaceFinalizeUpdate does, metadata written as sent, status
// kept. A deleted namespace stays while they hold it, and goes with the
// write that leaves both finalizer lists empty.
func TestNamespaceFinalizeSubresource(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	ns, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj("fz", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	bad := ns.DeepCopy()
	if err := unstructured.SetNestedStringSlice(bad.Object, []string{"bad", "Bad/x", "example.com/ok", "orphan"}, "spec", "finalizers"); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateFinalize(ctx, bad, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("finalize with invalid names: %v, want 422 Invalid", err)
	}
	for _, want := range []string{
		`spec.finalizers[0]: Invalid value: "bad": name is neither a standard finalizer name nor is it fully qualified`,
		`spec.finalizers[1]: Invalid value: "Bad/x": prefix part a lowercase RFC 1123 subdomain`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("finalize error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "spec.finalizers[2]") || strings.Contains(err.Error(), "spec.finalizers[3]") {
		t.Errorf("finalize error %q refuses a valid name", err)
	}
	given := namespaceObj("fz-bad", nil)
	given.Object["spec"] = map[string]any{"finalizers": []any{"nope"}}
	// Create validates them too, each error at spec.finalizers, unindexed,
	// as Kubernetes' ValidateNamespace reports them.
	if _, err := s.Create(ctx, kinds.NamespaceResource, given, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), `spec.finalizers: Invalid value: "nope": name is neither a standard finalizer name nor is it fully qualified`) {
		t.Errorf("create with spec.finalizers [nope]: %v, want 422 Invalid at spec.finalizers", err)
	}

	// Through /finalize: spec.finalizers and labels as sent, status kept.
	upd := ns.DeepCopy()
	if err := unstructured.SetNestedStringSlice(upd.Object, []string{"example.com/a", "kubernetes"}, "spec", "finalizers"); err != nil {
		t.Fatal(err)
	}
	upd.SetLabels(map[string]string{"team": "a"})
	if err := unstructured.SetNestedField(upd.Object, "Bogus", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	out, err := s.UpdateFinalize(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	phase, _, _ := unstructured.NestedString(out.Object, "status", "phase")
	if got := kinds.NamespaceSpecFinalizers(out.Object); !slices.Equal(got, []string{"example.com/a", "kubernetes"}) ||
		out.GetLabels()["team"] != "a" || phase != string(corev1.NamespaceActive) {
		t.Errorf("after finalize: spec.finalizers %q, labels %v, phase %q; want [example.com/a kubernetes], team=a, Active", got, out.GetLabels(), phase)
	}

	// A dry-run delete answers it marked, and leaves it.
	dry, deleted, err := s.DeleteObject(ctx, kinds.NamespaceResource, "", "fz", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil || deleted || dry.GetDeletionTimestamp() == nil {
		t.Fatalf("dry-run delete = %v, %v (deletionTimestamp %v); want it answered marked", deleted, err, dry.GetDeletionTimestamp())
	}
	if cur, err := s.Get(ctx, kinds.NamespaceResource, "", "fz", metav1.GetOptions{}); err != nil || cur.GetDeletionTimestamp() != nil {
		t.Fatalf("after a dry-run delete: %v, %v; want it unchanged", cur.GetDeletionTimestamp(), err)
	}

	// Delete: marked, Terminating, no grace period, metadata.finalizers
	// only those the propagation policy asks for.
	orphan := metav1.DeletePropagationOrphan
	del, deleted, err := s.DeleteObject(ctx, kinds.NamespaceResource, "", "fz", metav1.DeleteOptions{PropagationPolicy: &orphan})
	if err != nil || deleted {
		t.Fatalf("delete = %v, %v; want the namespace kept", deleted, err)
	}
	phase, _, _ = unstructured.NestedString(del.Object, "status", "phase")
	if phase != string(corev1.NamespaceTerminating) || del.GetDeletionTimestamp() == nil || del.GetDeletionGracePeriodSeconds() != nil ||
		!slices.Equal(del.GetFinalizers(), []string{metav1.FinalizerOrphanDependents}) {
		t.Errorf("deleted: phase %q, deletionTimestamp %v, grace %v, finalizers %q; want Terminating, marked, none, [orphan]",
			phase, del.GetDeletionTimestamp(), del.GetDeletionGracePeriodSeconds(), del.GetFinalizers())
	}
	// A plain update changes neither spec.finalizers nor status.
	plain := del.DeepCopy()
	unstructured.RemoveNestedField(plain.Object, "spec", "finalizers")
	plain.SetFinalizers(nil)
	if plain, err = s.Update(ctx, kinds.NamespaceResource, plain, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := kinds.NamespaceSpecFinalizers(plain.Object); len(got) != 2 {
		t.Errorf("a plain update changed spec.finalizers to %q", got)
	}
	// Again: nothing changes while spec.finalizers hold it.
	again, deleted, err := s.DeleteObject(ctx, kinds.NamespaceResource, "", "fz", metav1.DeleteOptions{})
	if err != nil || deleted || again.GetResourceVersion() != plain.GetResourceVersion() {
		t.Fatalf("delete of the held namespace = %v, %v; want it kept unchanged", deleted, err)
	}
	// Removing one finalizer keeps it; removing the last deletes it.
	if err := unstructured.SetNestedStringSlice(again.Object, []string{"example.com/a"}, "spec", "finalizers"); err != nil {
		t.Fatal(err)
	}
	if again, err = s.UpdateFinalize(ctx, again, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, kinds.NamespaceResource, "", "fz", metav1.GetOptions{}); err != nil {
		t.Fatalf("held by example.com/a: %v", err)
	}
	if err := unstructured.SetNestedField(again.Object, []any{}, "spec", "finalizers"); err != nil {
		t.Fatal(err)
	}
	last, err := s.UpdateFinalize(ctx, again, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Answered as written: the empty list omitted, as from a typed object.
	if spec, ok := last.Object["spec"].(map[string]any); !ok || len(spec) != 0 {
		t.Errorf("finalize to no finalizers answered spec %v, want {}", last.Object["spec"])
	}
	if _, err := s.Get(ctx, kinds.NamespaceResource, "", "fz", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after its last finalizer went through /finalize: %v, want 404", err)
	}

	// /finalize is a namespace's only.
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "default"}}}
	if _, _, err := s.update(ctx, kinds.ConfigMapResource, cm, metav1.UpdateOptions{}, "finalize", false); !apierrors.IsNotFound(err) {
		t.Errorf("finalize of a ConfigMap: %v, want 404", err)
	}
}
