package controller_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// TestStatusConvergesWhenCacheLagsOwnWrite: the controller writes status B
// while its cache of widgets lags; a second reconcile, on the stale cached
// object that still shows A, computes A again. It must write A, not skip
// the write because the stale copy already shows A: the store holds B, and
// B's event, a status-only change, triggers no reconcile.
func TestStatusConvergesWhenCacheLagsOwnWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var phase atomic.Value
		phase.Store("A")
		var calls atomic.Int64
		plugin := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			calls.Add(1)
			name := req.Object.String("metadata", "name")
			return &abi.ReconcileResponse{
				Status: abi.RawJSON(fmt.Sprintf(`{"phase":%q}`, phase.Load())),
				Children: []abi.RawJSON{abi.RawJSON(fmt.Sprintf(
					`{"apiVersion":"example.setpoint.dev/v1","kind":"Gizmo","metadata":{"name":"%s-gizmo"},"spec":{"size":"small"}}`, name))},
			}, nil
		})
		_, stop := runManager(t, newController(t, c, "widget", plugin, func(o *controller.Options) { o.ResyncPeriod = -1 }))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		if got := widgetPhase(t, c, "w"); got != "A" {
			t.Fatalf("phase = %q at start, want A", got)
		}

		// touch changes the child in a way the plugin does not care about,
		// which reconciles the widget without writing the child back.
		touch := func(v string) {
			t.Helper()
			g := get(t, c, gizmos, "w-gizmo")
			g.SetAnnotations(map[string]string{"test/touch": v})
			if _, err := c.Update(context.Background(), gizmos, g, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		release := c.Hold("widgets")
		phase.Store("B")
		before := calls.Load()
		touch("1") // writes B; the cache still shows A
		if got := widgetPhase(t, c, "w"); got != "B" {
			t.Fatalf("phase = %q after the first change, want B", got)
		}
		phase.Store("A")
		touch("2") // computes A on the cached object that shows A
		if calls.Load() < before+2 {
			t.Fatalf("plugin calls %d -> %d, want 2 more", before, calls.Load())
		}
		release()
		synctest.Wait()
		if got := widgetPhase(t, c, "w"); got != "A" {
			t.Errorf("phase = %q after the cache caught up, want A (the last computed status)", got)
		}
	})
}

func widgetPhase(t *testing.T, c controller.Client, name string) string {
	t.Helper()
	s, _, _ := unstructured.NestedString(get(t, c, widgets, name).Object, "status", "phase")
	return s
}

// TestStaleChildIsDeletedOnlyIfStillControlled: a child the plugin no
// longer wants is deleted as the lagging cache saw it, so the delete must
// not reach a child that changed since: one another object took over
// stays; one the widget still controls is deleted after a fresh read.
func TestStaleChildIsDeletedOnlyIfStillControlled(t *testing.T) {
	tests := []struct {
		name string
		// change edits the child while the cache of gizmos lags; other is
		// an object no controller reconciles.
		change func(g, other *unstructured.Unstructured)
		kept   bool
	}{
		{name: "taken over by another owner", kept: true, change: func(g, other *unstructured.Unstructured) {
			tr := true
			g.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: other.GetAPIVersion(), Kind: other.GetKind(), Name: other.GetName(), UID: other.GetUID(), Controller: &tr}})
		}},
		{name: "released", kept: true, change: func(g, _ *unstructured.Unstructured) { g.SetOwnerReferences(nil) }},
		{name: "still controlled, only annotated", change: func(g, _ *unstructured.Unstructured) {
			g.SetAnnotations(map[string]string{"test/touch": "1"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := instrument(newEngine(t))
				_, stop := runManager(t, newController(t, c, "widget", &gizmoPlugin{}, func(o *controller.Options) { o.ResyncPeriod = -1 }))
				defer stop()
				create(t, c, widgets, newWidget("w", "small"))
				other := create(t, c, gizmos, &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "example.setpoint.dev/v1", "kind": "Gizmo",
					"metadata": map[string]any{"name": "other", "namespace": "default"}, "spec": map[string]any{"size": "small"},
				}})
				synctest.Wait()
				release := c.Hold("gizmos")
				defer release()
				g := get(t, c, gizmos, "w-gizmo")
				tt.change(g, other)
				if _, err := c.Update(context.Background(), gizmos, g, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				// The widget no longer wants children; the cache still
				// shows the child as it was.
				updateWidget(t, c, "w", func(u *unstructured.Unstructured) {
					_ = unstructured.SetNestedField(u.Object, int64(0), "spec", "replicas")
				})
				synctest.Wait()
				_, err := c.Get(context.Background(), gizmos, "default", "w-gizmo", metav1.GetOptions{})
				switch {
				case tt.kept && apierrors.IsNotFound(err):
					t.Fatalf("the controller deleted w-gizmo, which it no longer controls (deletes: %d)", c.Writes("delete", "gizmos"))
				case !tt.kept && !apierrors.IsNotFound(err):
					t.Fatalf("w-gizmo, still controlled and not desired: get = %v, want not found", err)
				case err != nil && !apierrors.IsNotFound(err):
					t.Fatal(err)
				}
				if st, reason, msg := ready(get(t, c, widgets, "w")); st != "True" {
					t.Errorf("Ready = %s %s %q, want True", st, reason, msg)
				}
			})
		})
	}
}
