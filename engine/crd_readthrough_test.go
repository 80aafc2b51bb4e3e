package engine

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// TestCRDReadThrough: Services share a store, as replicas do. A CRD created
// through one is served by the others at their first request (a write, or
// the API's resolution of a request's resource), before any watch could
// have told them (none runs its loops here).
func TestCRDReadThrough(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	open := func() *Service {
		s, err := New(ctx, Options{Store: db})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b, c := open(), open(), open()
	if _, err := b.List(ctx, widgets, "default", metav1.ListOptions{}); err == nil {
		t.Fatal("widgets served before their CRD exists")
	}
	if _, ok := c.Resource(widgets); ok {
		t.Fatal("widgets resolved before their CRD exists")
	}
	if _, err := a.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server resolves a request's resource through Resource first.
	if r, ok := c.Resource(widgets); !ok || r.Kind != "Widget" {
		t.Fatalf("the API's lookup through a third Service: %+v %v", r, ok)
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"},
		"spec":     map[string]any{"name": "w", "size": "small"},
	}}
	if _, err := b.Create(ctx, widgets, w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through the other Service: %v", err)
	}
}
