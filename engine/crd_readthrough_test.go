package engine

import (
	"context"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store"
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
		s, err := New(ctx, Options{Store: db, SharedStore: true})
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

// countingStore counts the reads of a store.
type countingStore struct {
	store.Store
	gets, lists atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, key string, opts store.GetOptions) (*store.KeyValue, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key, opts)
}

func (c *countingStore) List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error) {
	c.lists.Add(1)
	return c.Store.List(ctx, prefix, opts)
}

// TestUnknownResourceAloneNoStoreRead: a server alone on its store has seen
// every CRD write through its own write path, so a request for a resource
// it does not serve is answered without reading the store; a server that
// shares its store reads the CRD through.
func TestUnknownResourceAloneNoStoreRead(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	unknown := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "gadgets"}
	for _, shared := range []bool{false, true} {
		cs := &countingStore{Store: db}
		s, err := New(ctx, Options{Store: cs, SharedStore: shared})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		cs.gets.Store(0)
		cs.lists.Store(0)
		if _, ok := s.Resource(unknown); ok {
			t.Fatal("an unknown resource resolved")
		}
		if _, err := s.Get(ctx, unknown, "default", "g", metav1.GetOptions{}); err == nil {
			t.Fatal("a GET of an unknown resource succeeded")
		}
		if _, err := s.List(ctx, unknown, "default", metav1.ListOptions{}); err == nil {
			t.Fatal("a LIST of an unknown resource succeeded")
		}
		reads := cs.gets.Load() + cs.lists.Load()
		if !shared && reads != 0 {
			t.Errorf("alone on its store: %d store reads for an unknown resource, want 0", reads)
		}
		if shared && reads == 0 {
			t.Error("sharing its store: no store read for an unknown resource, want the CRD read through")
		}
	}
}
