package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// GroupResources lists each served group/resource once, at the version
// ServedResource gives; ServedResource knows nothing else.
func TestGroupResources(t *testing.T) {
	s := newService(t)
	seen := map[schema.GroupResource]bool{}
	for _, r := range s.GroupResources() {
		gr := r.GVR.GroupResource()
		if seen[gr] {
			t.Errorf("%s listed twice", gr)
		}
		seen[gr] = true
		if got, ok := s.ServedResource(gr); !ok || got.GVR != r.GVR {
			t.Errorf("ServedResource(%s) = %v, %v; want %v", gr, got.GVR, ok, r.GVR)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{widgets, kinds.NamespaceResource, kinds.EventResource, kinds.CRDResource} {
		if !seen[gvr.GroupResource()] {
			t.Errorf("%s not listed", gvr.GroupResource())
		}
	}
	if r, ok := s.ServedResource(schema.GroupResource{Group: "example.setpoint.dev", Resource: "nothings"}); ok {
		t.Errorf("ServedResource of a resource not served = %v, true", r.GVR)
	}
}

// FinishDeletion deletes an object left deleting without finalizers, and
// only that object.
func TestFinishDeletion(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	deleting := func(name string) *unstructured.Unstructured {
		t.Helper()
		w := widget(name, "small", nil)
		w.SetFinalizers([]string{"example.setpoint.dev/hold"})
		out := mustCreate(t, s, w)
		if err := s.Delete(ctx, widgets, "default", name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// strand drops the finalizers past the engine, as a crash between the
	// write that removes the last one and its delete leaves the object.
	strand := func(name string) {
		t.Helper()
		k := store.ObjectKey(widgets.Group, widgets.Resource, "default", name)
		kv, err := s.store.Get(ctx, k, store.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(kv.Value, &doc); err != nil {
			t.Fatal(err)
		}
		delete(doc["metadata"].(map[string]any), "finalizers")
		b, _ := json.Marshal(doc)
		if _, err := s.store.Update(ctx, k, b, kv.ModRevision); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(name string) bool {
		_, err := s.Get(ctx, widgets, "default", name, metav1.GetOptions{})
		return err == nil
	}

	held := deleting("held")
	if done, err := s.FinishDeletion(ctx, widgets, "default", "held", held.GetUID()); err != nil || done || !exists("held") {
		t.Errorf("an object with a finalizer: done %v, err %v, exists %v; want it kept", done, err, exists("held"))
	}
	other := deleting("other")
	strand("other")
	if done, err := s.FinishDeletion(ctx, widgets, "default", "other", "another-uid"); err != nil || done || !exists("other") {
		t.Errorf("another uid: done %v, err %v, exists %v; want it kept", done, err, exists("other"))
	}
	if done, err := s.FinishDeletion(ctx, widgets, "default", "other", other.GetUID()); err != nil || !done || exists("other") {
		t.Errorf("a stranded deletion: done %v, err %v, exists %v; want it deleted", done, err, exists("other"))
	}
	if done, err := s.FinishDeletion(ctx, widgets, "default", "other", other.GetUID()); err != nil || done {
		t.Errorf("an object gone: done %v, err %v; want nothing done", done, err)
	}
}

// PurgeResource removes every stored object of a resource, served or not,
// and nothing else.
func TestPurgeResource(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	gone := schema.GroupResource{Group: "example.setpoint.dev", Resource: "ghosts"}
	for i := range 3 {
		doc := fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Ghost","metadata":{"name":"g%d","namespace":"default","uid":"u%d"}}`, i, i)
		if _, err := s.store.Create(ctx, store.ObjectKey(gone.Group, gone.Resource, "default", fmt.Sprintf("g%d", i)), []byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, s, widget("stays", "small", nil))
	if err := s.PurgeResource(ctx, gone); err != nil {
		t.Fatal(err)
	}
	res, err := s.store.List(ctx, store.ResourcePrefix(gone.Group, gone.Resource, ""), store.ListOptions{})
	if err != nil || len(res.Items) != 0 {
		t.Fatalf("objects left after the purge: %d, %v", len(res.Items), err)
	}
	if _, err := s.Get(ctx, widgets, "default", "stays", metav1.GetOptions{}); err != nil {
		t.Errorf("the purge of another resource removed a widget: %v", err)
	}
}

// SetCRDCondition writes a condition of the CRD it names, keeps its
// lastTransitionTime while its status stays, and leaves a CRD of another
// uid alone.
func TestSetCRDCondition(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	s := newService(t)
	s.opts.Now = func() time.Time { return now }
	const name = "widgets.example.setpoint.dev"
	crd, err := s.Get(ctx, kinds.CRDResource, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cond := func() map[string]any {
		t.Helper()
		cur, err := s.Get(ctx, kinds.CRDResource, "", name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == string(apiextensionsv1.Terminating) {
				return m
			}
		}
		return nil
	}
	set := func(uid string, status apiextensionsv1.ConditionStatus, reason string) {
		t.Helper()
		c := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: status, Reason: reason, Message: reason + " message"}
		if err := s.SetCRDCondition(ctx, name, types.UID(uid), c, metav1.UpdateOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	uid := string(crd.GetUID())
	set(uid, apiextensionsv1.ConditionTrue, "First")
	first := cond()
	if first == nil || first["status"] != "True" || first["reason"] != "First" || first["message"] != "First message" || first["lastTransitionTime"] != "2026-11-21T08:00:00Z" {
		t.Fatalf("condition after the first write = %v", first)
	}
	now = now.Add(time.Hour)
	set(uid, apiextensionsv1.ConditionTrue, "Second")
	if c := cond(); c["reason"] != "Second" || c["lastTransitionTime"] != "2026-11-21T08:00:00Z" {
		t.Errorf("same status, new reason: %v; want the reason changed and the transition time kept", c)
	}
	set(uid, apiextensionsv1.ConditionFalse, "Third")
	if c := cond(); c["status"] != "False" || c["lastTransitionTime"] != "2026-11-21T09:00:00Z" {
		t.Errorf("new status: %v; want the transition time moved", c)
	}
	set("another-uid", apiextensionsv1.ConditionTrue, "Fourth")
	if c := cond(); c["reason"] != "Third" {
		t.Errorf("a write for another uid changed the condition: %v", c)
	}
}
