package controller_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

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
