package test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testsupport"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestAPIFinalizersAndGarbageCollection checks finalizers and the three
// deletion propagation policies against the built server, with client-go
// and kubectl's --cascade.
func TestAPIFinalizersAndGarbageCollection(t *testing.T) {
	const ns = "gc"
	s, dc := clientGoSetup(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	widgets := dc.Resource(widgetsGVR).Namespace(ns)

	create := func(t *testing.T, name string, owner *unstructured.Unstructured, finalizers ...string) *unstructured.Unstructured {
		t.Helper()
		w := newWidget(ns, name, "small", nil)
		if owner != nil {
			yes := true
			w.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.setpoint.dev/v1", Kind: "Widget",
				Name: owner.GetName(), UID: owner.GetUID(), BlockOwnerDeletion: &yes}})
		}
		w.SetFinalizers(finalizers)
		out, err := widgets.Create(ctx, w, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	gone := func(name string) bool {
		_, err := widgets.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	eventually := func(t *testing.T, what string, cond func() bool) {
		t.Helper()
		testsupport.Eventually(t, 30*time.Second, what, cond)
	}
	del := func(t *testing.T, name string, policy metav1.DeletionPropagation) {
		t.Helper()
		if err := widgets.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("finalizer", func(t *testing.T) {
		create(t, "fin", nil, "example.setpoint.dev/hold")
		del(t, "fin", metav1.DeletePropagationBackground)
		w, err := widgets.Get(ctx, "fin", metav1.GetOptions{})
		if err != nil || w.GetDeletionTimestamp() == nil {
			t.Fatalf("after delete: %v; want it kept with a deletionTimestamp", err)
		}
		if _, err := widgets.Patch(ctx, "fin", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if !gone("fin") {
			t.Fatal("still there after its finalizer was removed")
		}
	})
	t.Run("background", func(t *testing.T) {
		owner := create(t, "bg", nil)
		create(t, "bg-child", owner)
		del(t, "bg", metav1.DeletePropagationBackground)
		eventually(t, "bg-child collected", func() bool { return gone("bg-child") })
	})
	t.Run("foreground", func(t *testing.T) {
		owner := create(t, "fg", nil)
		create(t, "fg-child", owner, "example.setpoint.dev/hold")
		del(t, "fg", metav1.DeletePropagationForeground)
		eventually(t, "fg-child terminating", func() bool {
			c, err := widgets.Get(ctx, "fg-child", metav1.GetOptions{})
			return err == nil && c.GetDeletionTimestamp() != nil
		})
		o, err := widgets.Get(ctx, "fg", metav1.GetOptions{})
		if err != nil || !slices.Contains(o.GetFinalizers(), metav1.FinalizerDeleteDependents) {
			t.Fatalf("owner = %v, %v; want it waiting with the foregroundDeletion finalizer", o, err)
		}
		if _, err := widgets.Patch(ctx, "fg-child", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "fg deleted after its child", func() bool { return gone("fg") })
	})
	t.Run("orphan with kubectl", func(t *testing.T) {
		owner := create(t, "or", nil)
		create(t, "or-child", owner)
		if out, errOut, err := s.Kubectl("delete", "widget", "or", "-n", ns, "--cascade=orphan"); err != nil {
			t.Fatalf("kubectl delete --cascade=orphan: %v %s%s", err, out, errOut)
		}
		eventually(t, "or deleted", func() bool { return gone("or") })
		c, err := widgets.Get(ctx, "or-child", metav1.GetOptions{})
		if err != nil || len(c.GetOwnerReferences()) != 0 {
			t.Fatalf("orphan = %v, %v; want it kept without owner references", c, err)
		}
	})
}
