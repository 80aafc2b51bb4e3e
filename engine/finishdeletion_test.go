package engine

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/store"
)

// strand leaves the widget name as a crash between the two steps of a
// finalizer's removal would: deleting, with no finalizer, still stored. It
// writes the store directly, past the engine.
func strand(t *testing.T, s *Service, st store.Store, name string) {
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
	s, st := newGCService(t, false)
	strand(t, s, st.Store, "before-start")
	runService(t, s)
	eventually(t, "the deletion stranded before the start finished", widgetGone(s, "before-start"))
	strand(t, s, st.Store, "while-running")
	eventually(t, "the deletion stranded while running finished", widgetGone(s, "while-running"))
	// A deleting object that still has a finalizer stays.
	held := widget("held", "small", nil)
	held.SetFinalizers([]string{"example.setpoint.dev/hold"})
	held = mustCreate(t, s, held)
	if err := s.Delete(context.Background(), widgets, "default", "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gcSynced(t, s)
	// It is not queued (no finalizer of the collector's); an attempt anyway
	// must leave it.
	if err := s.gc.attempt(context.Background(), held.GetUID()); err != nil {
		t.Fatal(err)
	}
	if widgetGone(s, "held")() {
		t.Error("a deleting object with a finalizer was deleted")
	}
}

// The full sweep finishes a stranded deletion too.
func TestSweepFinishesStrandedDeletion(t *testing.T) {
	s, st := newGCService(t, false)
	strand(t, s, st.Store, "stranded")
	if _, err := s.sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !widgetGone(s, "stranded")() {
		t.Error("the sweep left a deleting object without finalizers")
	}
}

// cancelAfterUpdate cancels the caller's context as soon as an update is
// committed: a controller stopped by a hot swap right then, or a client
// that hung up.
type cancelAfterUpdate struct {
	store.Store
	cancel context.CancelFunc
}

func (c *cancelAfterUpdate) Update(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	newRev, err := c.Store.Update(ctx, key, value, rev)
	if c.cancel != nil {
		c.cancel()
	}
	return newRev, err
}

// The update that removes the last finalizer of a deleting object deletes
// it even when its caller gives up right after the update is committed.
func TestLastFinalizerRemovalDeletesDespiteCancel(t *testing.T) {
	s, st := newGCService(t, false) // no collector: only the write itself may delete
	w := widget("w", "small", nil)
	w.SetFinalizers([]string{"example.setpoint.dev/hold"})
	mustCreate(t, s, w)
	if err := s.Delete(context.Background(), widgets, "default", "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := s.Get(context.Background(), widgets, "default", "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.SetFinalizers(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := &cancelAfterUpdate{Store: st.Store, cancel: cancel}
	s.store = cs
	_, err = s.Update(ctx, widgets, cur, metav1.UpdateOptions{})
	s.store = st
	if err != nil {
		t.Fatalf("update removing the last finalizer: %v", err)
	}
	if !widgetGone(s, "w")() {
		t.Error("the object stayed, deleting with no finalizer, after its caller's context ended")
	}
}
