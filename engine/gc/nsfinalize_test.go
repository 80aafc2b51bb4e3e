package gc

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// namespaceGone reports whether namespace name is gone.
func namespaceGone(s *engine.Service, name string) func() bool {
	return func() bool {
		_, err := s.Get(context.Background(), kinds.NamespaceResource, "", name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

// inNamespace creates a widget in namespace ns.
func inNamespace(t *testing.T, s *engine.Service, ns, name string, finalizers ...string) {
	t.Helper()
	w := widget(name, "small", nil)
	w.SetNamespace(ns)
	w.SetFinalizers(finalizers)
	mustCreate(t, s, w)
}

// TestNamespaceFinalizedThroughSpec: a deleted namespace is held by its
// spec.finalizers, as in Kubernetes. The collector empties it and removes
// kubernetes through /finalize; a finalizer of someone else's in
// spec.finalizers keeps it, Terminating and empty, until it too is removed
// through /finalize, which deletes it.
func TestNamespaceFinalizedThroughSpec(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newGCService(t, true)
	ns := namespaceObj("fin1")
	ns.Object["spec"] = map[string]any{"finalizers": []any{"example.setpoint.dev/keep"}}
	if _, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inNamespace(t, s, "fin1", "w1")
	inNamespace(t, s, "fin1", "w2")
	out, deleted, err := s.DeleteObject(ctx, kinds.NamespaceResource, "", "fin1", metav1.DeleteOptions{})
	if err != nil || deleted {
		t.Fatalf("delete = %v, %v; want it kept", deleted, err)
	}
	if fins := out.GetFinalizers(); len(fins) != 0 {
		t.Errorf("metadata.finalizers of the deleted namespace = %q, want none (spec.finalizers hold it)", fins)
	}
	var cur *unstructured.Unstructured
	testsupport.Poll(t, 10*time.Second, "kubernetes removed from spec.finalizers", func() (bool, string) {
		cur, err = s.Get(ctx, kinds.NamespaceResource, "", "fin1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		fins := kinds.NamespaceSpecFinalizers(cur.Object)
		return slices.Equal(fins, []string{"example.setpoint.dev/keep"}), "spec.finalizers " + jsonOf(fins)
	})
	for _, w := range []string{"w1", "w2"} {
		if _, err := s.Get(ctx, widgets, "fin1", w, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("widget %s of the finalized namespace: %v, want gone", w, err)
		}
	}
	// A delete again changes nothing while spec.finalizers hold it.
	again, deleted, err := s.DeleteObject(ctx, kinds.NamespaceResource, "", "fin1", metav1.DeleteOptions{})
	if err != nil || deleted || again.GetResourceVersion() != cur.GetResourceVersion() {
		t.Fatalf("delete of the held namespace = %v, %v (rv %s, was %s); want it kept unchanged", deleted, err, again.GetResourceVersion(), cur.GetResourceVersion())
	}
	unstructured.RemoveNestedField(cur.Object, "spec", "finalizers")
	if _, err := s.UpdateFinalize(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !namespaceGone(s, "fin1")() {
		t.Error("the namespace is still there after its last finalizer was removed through /finalize")
	}
}

// TestNamespaceHeldByMetadataFinalizer: a namespace deleted by an earlier
// Setpoint version (held by kubernetes in metadata.finalizers, no
// spec.finalizers), written into the store as that version left it, is
// emptied and deleted, by the watch-driven collector and by the sweep.
func TestNamespaceHeldByMetadataFinalizer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sweep bool
	}{{name: "collector"}, {name: "sweep", sweep: true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, c, st := newGCService(t, false)
			legacyTerminating(t, s, st, "old", "w1")
			if tc.sweep {
				for range 5 {
					if _, err := c.sweep(ctx); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				runService(t, s, c)
			}
			testsupport.Eventually(t, 10*time.Second, "the namespace an earlier version deleted gone", namespaceGone(s, "old"))
			if _, err := s.Get(ctx, widgets, "old", "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("its widget: %v, want gone", err)
			}
		})
	}
}

// legacyTerminating stores namespace name as earlier Setpoint versions
// left a deleted one: Terminating, kubernetes in metadata.finalizers, no
// spec.finalizers, holding widget. It writes the store directly, past the
// engine.
func legacyTerminating(t *testing.T, s *engine.Service, st store.Store, name, widget string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj(name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inNamespace(t, s, name, widget)
	k := store.ObjectKey("", kinds.NamespaceResource.Resource, "", name)
	kv, err := st.Get(ctx, k, store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(kv.Value, &doc); err != nil {
		t.Fatal(err)
	}
	meta := doc["metadata"].(map[string]any)
	meta["finalizers"] = []any{kinds.NamespaceFinalizer}
	meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	meta["deletionGracePeriodSeconds"] = 0
	delete(doc, "spec")
	doc["status"] = map[string]any{"phase": "Terminating"}
	b, _ := json.Marshal(doc)
	if _, err := st.Update(ctx, k, b, kv.ModRevision); err != nil {
		t.Fatal(err)
	}
}

// TestNamespaceFinalizedBeforeDelete: a namespace whose spec.finalizers a
// client emptied before deleting it is held by nothing once deleted: the
// collector finishes its deletion, and its sweep collects the content.
func TestNamespaceFinalizedBeforeDelete(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newGCService(t, true)
	ns, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj("bare"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inNamespace(t, s, "bare", "w1")
	unstructured.RemoveNestedField(ns.Object, "spec", "finalizers")
	if _, err := s.UpdateFinalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "bare", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "the finalized namespace gone", namespaceGone(s, "bare"))
	if _, err := c.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, widgets, "bare", "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the widget of the deleted namespace after a sweep: %v, want gone", err)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestNamespaceDeletedBeforeStart: a namespace deleted while no collector
// ran (held by spec.finalizers alone, which the graph's metadata does not
// show) is found by the list the collector starts from, emptied and
// deleted.
func TestNamespaceDeletedBeforeStart(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newGCService(t, false)
	if _, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj("early"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inNamespace(t, s, "early", "w1")
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "early", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	runService(t, s, c)
	testsupport.Eventually(t, 10*time.Second, "the namespace deleted before the start gone", namespaceGone(s, "early"))
	if _, err := s.Get(ctx, widgets, "early", "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("its widget: %v, want gone", err)
	}
}
