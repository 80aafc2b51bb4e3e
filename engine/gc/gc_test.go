package gc

import (
	"context"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

func TestFinalizersAndGC(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newGCService(t, true)

	owned := func(name string, owner *unstructured.Unstructured, block bool) *unstructured.Unstructured {
		u := widget(name, "small", nil)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.setpoint.dev/v1", Kind: "Widget",
			Name: owner.GetName(), UID: owner.GetUID(), BlockOwnerDeletion: &block}})
		return mustCreate(t, s, u)
	}
	gone := func(name string) bool {
		_, err := s.Get(ctx, widgets, "default", name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}

	t.Run("finalizer", func(t *testing.T) {
		u := widget("fin", "small", nil)
		u.SetFinalizers([]string{"example.setpoint.dev/cleanup"})
		mustCreate(t, s, u)
		if err := s.Delete(ctx, widgets, "default", "fin", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cur, err := s.Get(ctx, widgets, "default", "fin", metav1.GetOptions{})
		if err != nil || cur.GetDeletionTimestamp() == nil {
			t.Fatalf("after delete: %v, %v; want it kept with a deletionTimestamp", cur, err)
		}
		if _, err := s.Patch(ctx, widgets, "default", "fin", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if !gone("fin") {
			t.Error("object stayed after its last finalizer was removed")
		}
	})
	t.Run("background", func(t *testing.T) {
		owner := mustCreate(t, s, widget("bg-owner", "small", nil))
		owned("bg-dep", owner, false)
		if err := s.Delete(ctx, widgets, "default", "bg-owner", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, 5*time.Second, "bg-dep collected", func() bool { return gone("bg-dep") })
	})
	t.Run("orphan", func(t *testing.T) {
		owner := mustCreate(t, s, widget("or-owner", "small", nil))
		owned("or-dep", owner, false)
		orphan := metav1.DeletePropagationOrphan
		if err := s.Delete(ctx, widgets, "default", "or-owner", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, 5*time.Second, "or-owner deleted", func() bool { return gone("or-owner") })
		dep, err := s.Get(ctx, widgets, "default", "or-dep", metav1.GetOptions{})
		if err != nil || len(dep.GetOwnerReferences()) != 0 {
			t.Fatalf("orphan = %v, %v; want it kept without owner references", dep, err)
		}
	})
	t.Run("foreground", func(t *testing.T) {
		owner := mustCreate(t, s, widget("fg-owner", "small", nil))
		dep := widget("fg-dep", "small", nil)
		block := true
		dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.setpoint.dev/v1", Kind: "Widget",
			Name: owner.GetName(), UID: owner.GetUID(), BlockOwnerDeletion: &block}})
		dep.SetFinalizers([]string{"example.setpoint.dev/hold"})
		mustCreate(t, s, dep)
		fg := metav1.DeletePropagationForeground
		if err := s.Delete(ctx, widgets, "default", "fg-owner", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, 5*time.Second, "fg-dep terminating", func() bool {
			d, err := s.Get(ctx, widgets, "default", "fg-dep", metav1.GetOptions{})
			return err == nil && d.GetDeletionTimestamp() != nil
		})
		if gone("fg-owner") {
			t.Fatal("owner went before its blocking dependent")
		}
		if _, err := s.Patch(ctx, widgets, "default", "fg-dep", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, 5*time.Second, "fg-owner deleted", func() bool { return gone("fg-owner") })
	})
	t.Run("preconditions", func(t *testing.T) {
		w := mustCreate(t, s, widget("pre", "small", nil))
		stale := strconv.Itoa(1)
		if err := s.Delete(ctx, widgets, "default", "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &stale}}); !apierrors.IsConflict(err) {
			t.Errorf("delete with a stale precondition = %v, want Conflict", err)
		}
		rv := w.GetResourceVersion()
		if err := s.Delete(ctx, widgets, "default", "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}); err != nil {
			t.Errorf("delete with a current precondition: %v", err)
		}
	})
	t.Run("default namespace is kept", func(t *testing.T) {
		if err := s.Delete(ctx, kinds.NamespaceResource, "", "default", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("delete default = %v, want Forbidden", err)
		}
	})
}

// New refuses to build a collector without its Service or its store.
func TestNewRequiresServiceAndStore(t *testing.T) {
	s, _, st := newGCService(t, false)
	for _, tc := range []struct {
		name string
		svc  *engine.Service
		opts Options
	}{
		{name: "no service", opts: Options{Store: st}},
		{name: "no store", svc: s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := New(tc.svc, tc.opts); err == nil {
				t.Errorf("New = %v, nil; want an error", c)
			}
		})
	}
}
