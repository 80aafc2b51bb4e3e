package gc

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// strand leaves the widget name as a crash between the two steps of a
// finalizer's removal would: deleting, with no finalizer, still stored. It
// writes the store directly, past the engine.
func strand(t *testing.T, s *engine.Service, st store.Store, name string) {
	t.Helper()
	ctx := context.Background()
	w := widget(name, "small", nil)
	w.SetFinalizers([]string{"example.setpoint.dev/hold"})
	mustCreate(t, s, w)
	if err := s.Delete(ctx, widgets, "default", name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	k := store.ObjectKey(widgets.Group, widgets.Resource, "default", name)
	kv, err := st.Get(ctx, k, store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(kv.Value, &doc); err != nil {
		t.Fatal(err)
	}
	meta := doc["metadata"].(map[string]any)
	if meta["deletionTimestamp"] == nil {
		t.Fatalf("%s has no deletionTimestamp after its delete: %v", name, meta)
	}
	delete(meta, "finalizers")
	b, _ := json.Marshal(doc)
	if _, err := st.Update(ctx, k, b, kv.ModRevision); err != nil {
		t.Fatal(err)
	}
}

// An object left deleting without finalizers is deleted by the collector:
// found by the list it starts from, and by its watch afterwards.
func TestGCFinishesStrandedDeletions(t *testing.T) {
	s, c, st := newGCService(t, false)
	strand(t, s, st.Store, "before-start")
	runService(t, s, c)
	testsupport.Eventually(t, 10*time.Second, "the deletion stranded before the start finished", widgetGone(s, "before-start"))
	strand(t, s, st.Store, "while-running")
	testsupport.Eventually(t, 10*time.Second, "the deletion stranded while running finished", widgetGone(s, "while-running"))
	// A deleting object that still has a finalizer stays.
	held := widget("held", "small", nil)
	held.SetFinalizers([]string{"example.setpoint.dev/hold"})
	held = mustCreate(t, s, held)
	if err := s.Delete(context.Background(), widgets, "default", "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gcSynced(t, c)
	// It is not queued (no finalizer of the collector's); an attempt anyway
	// must leave it.
	if err := c.attempt(context.Background(), held.GetUID()); err != nil {
		t.Fatal(err)
	}
	if widgetGone(s, "held")() {
		t.Error("a deleting object with a finalizer was deleted")
	}
}

// The full sweep finishes a stranded deletion too.
func TestSweepFinishesStrandedDeletion(t *testing.T) {
	s, c, st := newGCService(t, false)
	strand(t, s, st.Store, "stranded")
	if _, err := c.sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !widgetGone(s, "stranded")() {
		t.Error("the sweep left a deleting object without finalizers")
	}
}
