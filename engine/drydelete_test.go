package engine

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// TestDryRunDeleteWithFinalizers: a dry-run delete of an object that
// finalizers hold answers it as the delete would leave it, as
// kube-apiserver's registry does: still there, marked deleted (a
// deletionTimestamp, a grace period of 0, its generation counted once more
// where the kind counts them), with the propagation finalizer the options
// ask for, and its stored resourceVersion; nothing is written. The delete
// itself then gives the stored object the same marks.
func TestDryRunDeleteWithFinalizers(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	w := widget("held", "small", nil)
	w.SetFinalizers([]string{"example.com/hold"})
	created := mustCreate(t, s, w)
	if created.GetGeneration() != 1 {
		t.Fatalf("generation of the new widget: %d, want 1", created.GetGeneration())
	}

	orphan := metav1.DeletePropagationOrphan
	out, deleted, err := s.DeleteObject(ctx, widgets, "default", "held", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}, PropagationPolicy: &orphan})
	if err != nil {
		t.Fatalf("dry-run delete: %v", err)
	}
	if deleted {
		t.Errorf("dry-run delete answered the held widget as deleted")
	}
	check := func(what string, u *unstructured.Unstructured) {
		t.Helper()
		if u.GetDeletionTimestamp() == nil {
			t.Errorf("%s: no deletionTimestamp", what)
		}
		if g := u.GetDeletionGracePeriodSeconds(); g == nil || *g != 0 {
			t.Errorf("%s: deletionGracePeriodSeconds %v, want 0", what, g)
		}
		if u.GetGeneration() != 2 {
			t.Errorf("%s: generation %d, want 2", what, u.GetGeneration())
		}
		if fins := u.GetFinalizers(); !slices.Equal(fins, []string{"example.com/hold", metav1.FinalizerOrphanDependents}) {
			t.Errorf("%s: finalizers %v", what, fins)
		}
	}
	check("dry-run answer", out)
	if out.GetResourceVersion() != created.GetResourceVersion() {
		t.Errorf("dry-run answer: resourceVersion %s, want the stored %s", out.GetResourceVersion(), created.GetResourceVersion())
	}
	got, err := s.Get(ctx, widgets, "default", "held", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after the dry run: %v", err)
	}
	if got.GetDeletionTimestamp() != nil || got.GetResourceVersion() != created.GetResourceVersion() || got.GetGeneration() != 1 {
		t.Errorf("the dry run changed the stored widget: %v", got.Object["metadata"])
	}

	out, deleted, err = s.DeleteObject(ctx, widgets, "default", "held", metav1.DeleteOptions{PropagationPolicy: &orphan})
	if err != nil || deleted {
		t.Fatalf("delete: deleted %v, err %v", deleted, err)
	}
	check("delete answer", out)
	// Once marked, a dry-run delete answers it as it is.
	again, deleted, err := s.DeleteObject(ctx, widgets, "default", "held", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}, PropagationPolicy: &orphan})
	if err != nil || deleted {
		t.Fatalf("dry-run delete of the marked widget: deleted %v, err %v", deleted, err)
	}
	check("dry-run answer once marked", again)
	if !again.GetDeletionTimestamp().Equal(out.GetDeletionTimestamp()) || again.GetResourceVersion() != out.GetResourceVersion() {
		t.Errorf("dry-run answer once marked: %v, want the stored %v", again.Object["metadata"], out.Object["metadata"])
	}

	// An object no finalizer holds is answered as deleted, and stays.
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("default")
	cm.SetName("free")
	if _, err := s.Create(ctx, kinds.ConfigMapResource, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, deleted, err := s.DeleteObject(ctx, kinds.ConfigMapResource, "default", "free", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil || !deleted {
		t.Errorf("dry-run delete of a free configmap: deleted %v, err %v", deleted, err)
	}
	if _, err := s.Get(ctx, kinds.ConfigMapResource, "default", "free", metav1.GetOptions{}); err != nil {
		t.Errorf("the dry run deleted the configmap: %v", err)
	}
}
