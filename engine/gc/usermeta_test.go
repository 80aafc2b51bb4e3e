package gc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

var freeFormCRD = testsupport.CRD{Kind: "Note", Schema: `{type: object, x-kubernetes-preserve-unknown-fields: true}`}

// A top-level key that differs from "metadata" only by case is the user's
// data (kept by x-kubernetes-preserve-unknown-fields): owner references in
// it must not get an object with no owner collected, neither by the graph
// nor by the sweep.
func TestGCIgnoresUserDataThatLooksLikeMetadata(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newGCService(t, true)
	if _, err := s.Create(ctx, kinds.CRDResource, freeFormCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	notes := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "notes"}
	testsupport.Eventually(t, 10*time.Second, "notes served", func() bool { _, ok := s.ServedResource(notes.GroupResource()); return ok })
	var uids []types.UID
	for i, key := range []string{"METADATA", "Metadata"} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.setpoint.dev/v1", "kind": "Note",
			"metadata": map[string]any{"name": fmt.Sprintf("victim-%d", i), "namespace": "default"},
			key: map[string]any{
				"ownerReferences": []any{map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget", "name": "ghost", "uid": "ghost-uid"}},
			},
		}}
		created, err := s.Create(ctx, notes, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(created.GetOwnerReferences()) != 0 || created.Object[key] == nil {
			t.Fatalf("stored %s: ownerReferences %v, %s kept %v", key, created.GetOwnerReferences(), key, created.Object[key] != nil)
		}
		uids = append(uids, created.GetUID())
	}
	// Whatever the graph queued or not, an attempt at each and a sweep
	// must leave them.
	gcSynced(t, c)
	for _, uid := range uids {
		if err := c.attempt(ctx, uid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"METADATA", "Metadata"} {
		if _, err := s.Get(ctx, notes, "default", fmt.Sprintf("victim-%d", i), metav1.GetOptions{}); err != nil {
			t.Errorf("an object with no owner references, holding a %s member, was collected: %v", key, err)
		}
	}
}

// The collector decides on the stored object, not on the owner references
// it last saw: a dependent adopted by a live owner since then stays.
func TestGCDecidesOnTheStoredObject(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newGCService(t, false)
	gone := mustCreate(t, s, widget("gone", "small", nil))
	live := mustCreate(t, s, widget("live", "small", nil))
	dep := mustCreate(t, s, ownedWidget("dep", false, gone))
	stale := dep.DeepCopy() // what a lagging graph holds: owned by gone only
	if err := s.Delete(ctx, widgets, "default", "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	adopted := ownedWidget("dep", false, live)
	adopted.SetResourceVersion(dep.GetResourceVersion())
	adopted.SetUID(dep.GetUID())
	if _, err := s.Update(ctx, widgets, adopted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, _ := s.ServedResource(widgets.GroupResource())
	if _, err := c.collectOwnership(ctx, &gcObject{res: r, obj: stale}, nil, func(types.UID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if widgetGone(s, "dep")() {
		t.Error("a dependent adopted by a live owner was collected on its stale owner references")
	}
}

// A second Run of the collector, or of its Service, while one runs is
// refused; the running one keeps collecting.
func TestRunRefusesASecondRun(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newGCService(t, true)
	gcSynced(t, c)
	second, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Run(second); !errors.Is(err, ErrRunning) {
		t.Fatalf("a second Run of the collector returned %v, want ErrRunning", err)
	}
	if err := s.Run(second); !errors.Is(err, engine.ErrRunning) {
		t.Fatalf("a second Run of the Service returned %v, want engine.ErrRunning", err)
	}
	owner := mustCreate(t, s, widget("run-owner", "small", nil))
	mustCreate(t, s, ownedWidget("run-dep", false, owner))
	gcSynced(t, c)
	if err := s.Delete(ctx, widgets, "default", "run-owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "run-dep collected", widgetGone(s, "run-dep"))
}
