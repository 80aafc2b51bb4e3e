package gc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// nsConditions returns the status conditions of namespace name by type, as
// "status reason: message".
func nsConditions(t *testing.T, s *engine.Service, name string) (map[string]string, *unstructured.Unstructured) {
	t.Helper()
	ns, err := s.Get(context.Background(), kinds.NamespaceResource, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	conds, _, _ := unstructured.NestedSlice(ns.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		out[m["type"].(string)] = fmt.Sprintf("%s %s: %s", m["status"], m["reason"], m["message"])
	}
	return out, ns
}

// TestNamespaceConditionsWhileTerminating: the collector emptying a
// terminating namespace keeps the conditions Kubernetes' namespace
// controller writes, and writes them only when they change.
func TestNamespaceConditionsWhileTerminating(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newGCService(t, true)
	ns := namespaceObj("qa2")
	// A finalizer of its own keeps the namespace once its content is gone.
	ns.SetFinalizers([]string{"example.setpoint.dev/keep"})
	if _, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	held := widget("held", "small", nil)
	held.SetNamespace("qa2")
	held.SetFinalizers([]string{"example.setpoint.dev/hold", "example.setpoint.dev/other"})
	mustCreate(t, s, held)
	free := widget("free", "small", nil)
	free.SetNamespace("qa2")
	mustCreate(t, s, free)
	if conds, _ := nsConditions(t, s, "qa2"); len(conds) != 0 {
		t.Fatalf("conditions of an active namespace: %v, want none", conds)
	}
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "qa2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{
		"NamespaceDeletionDiscoveryFailure":           "False ResourcesDiscovered: All resources successfully discovered",
		"NamespaceDeletionGroupVersionParsingFailure": "False ParsedGroupVersions: All legacy kube types successfully parsed",
		"NamespaceDeletionContentFailure":             "False ContentDeleted: All content successfully deleted, may be waiting on finalization",
		"NamespaceContentRemaining":                   "True SomeResourcesRemain: Some resources are remaining: widgets.example.setpoint.dev has 1 resource instances",
		"NamespaceFinalizersRemaining":                "True SomeFinalizersRemain: Some content in the namespace has finalizers remaining: example.setpoint.dev/hold in 1 resource instances, example.setpoint.dev/other in 1 resource instances",
	}
	waitConditions := func(what string) *unstructured.Unstructured {
		t.Helper()
		var obj *unstructured.Unstructured
		testsupport.Poll(t, 10*time.Second, what+" conditions", func() (bool, string) {
			var got map[string]string
			got, obj = nsConditions(t, s, "qa2")
			return cmp.Equal(got, want), "(-want +got):\n" + cmp.Diff(want, got)
		})
		return obj
	}
	first := waitConditions("terminating")
	testsupport.Eventually(t, 10*time.Second, "free to go", func() bool {
		_, err := s.Get(ctx, widgets, "qa2", "free", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// Nothing changes: no more writes.
	gcSynced(t, c)
	time.Sleep(200 * time.Millisecond)
	gcSynced(t, c)
	if _, cur := nsConditions(t, s, "qa2"); cur.GetResourceVersion() != first.GetResourceVersion() {
		t.Errorf("namespace rewritten with the same conditions: resourceVersion %s, then %s", first.GetResourceVersion(), cur.GetResourceVersion())
	}
	transition := func(u *unstructured.Unstructured, typ string) string {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == typ {
				return fmt.Sprint(m["lastTransitionTime"])
			}
		}
		return ""
	}

	// One finalizer goes: the message follows, the transition time stays.
	setFinalizers := func(fins ...string) {
		t.Helper()
		cur, err := s.Get(ctx, widgets, "qa2", "held", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.SetFinalizers(fins)
		if _, err := s.Update(ctx, widgets, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setFinalizers("example.setpoint.dev/hold")
	want["NamespaceFinalizersRemaining"] = "True SomeFinalizersRemain: Some content in the namespace has finalizers remaining: example.setpoint.dev/hold in 1 resource instances"
	second := waitConditions("a finalizer removed")
	if a, b := transition(first, "NamespaceFinalizersRemaining"), transition(second, "NamespaceFinalizersRemaining"); a != b {
		t.Errorf("lastTransitionTime moved from %s to %s without a status change", a, b)
	}

	// The last one goes: all clear, and the namespace waits for its own finalizer.
	setFinalizers()
	want["NamespaceContentRemaining"] = "False ContentRemoved: All content successfully removed"
	want["NamespaceFinalizersRemaining"] = "False ContentHasNoFinalizers: All content-preserving finalizers finished"
	waitConditions("the content gone")
	// The collector's finalizer goes right after.
	var last *unstructured.Unstructured
	testsupport.Eventually(t, 10*time.Second, "the kubernetes finalizer to go", func() bool {
		_, last = nsConditions(t, s, "qa2")
		return fmt.Sprint(last.GetFinalizers()) == "[example.setpoint.dev/keep]"
	})
	if got, _ := nsConditions(t, s, "qa2"); !cmp.Equal(got, want) {
		t.Errorf("conditions once the finalizer went (-want +got):\n%s", cmp.Diff(want, got))
	}
	if phase, _, _ := unstructured.NestedString(last.Object, "status", "phase"); phase != "Terminating" {
		t.Errorf("phase = %q, want Terminating", phase)
	}
}

func TestEventsAndNamespaces(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newGCService(t, true)

	ns := kindstest.FromYAML(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n")
	out, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(out.Object, "status", "phase"); p != "Active" {
		t.Errorf("namespace phase = %q", p)
	}
	w := widget("w", "small", nil)
	w.SetNamespace("team")
	mustCreate(t, s, w)
	for _, name := range []string{"e1", "e2"} {
		ev := kindstest.FromYAML(t, "apiVersion: v1\nkind: Event\nmetadata: {name: "+name+", namespace: team}\ninvolvedObject: {kind: Widget, name: "+name+"-target, namespace: team}\nreason: Provisioned\ntype: Normal\nmessage: done\n")
		if _, err := s.Create(ctx, kinds.EventResource, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := s.List(ctx, kinds.EventResource, "team", metav1.ListOptions{FieldSelector: "involvedObject.name=e2-target,involvedObject.kind=Widget"})
	if err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "e2" {
		t.Fatalf("events by involved object = %v, %v", l, err)
	}
	// Deleting a namespace makes it Terminating until what was in it is gone.
	held := widget("held", "small", nil)
	held.SetNamespace("team")
	held.SetFinalizers([]string{"example.setpoint.dev/hold"})
	mustCreate(t, s, held)
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, kinds.NamespaceResource, "", "team", metav1.GetOptions{})
	if p, _, _ := unstructured.NestedString(got.Object, "status", "phase"); err != nil || p != "Terminating" {
		t.Fatalf("deleted namespace: phase %q, %v; want Terminating", p, err)
	}
	late := widget("late", "small", nil)
	late.SetNamespace("team")
	if _, err := s.Create(ctx, widgets, late, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create in a terminating namespace = %v, want Forbidden", err)
	}
	testsupport.Eventually(t, 10*time.Second, "the plain widget collected", func() bool {
		_, err := s.Get(ctx, widgets, "team", "w", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := s.Get(ctx, kinds.NamespaceResource, "", "team", metav1.GetOptions{}); err != nil {
		t.Fatalf("the namespace went while a widget in it waits for its finalizer: %v", err)
	}
	if _, err := s.Patch(ctx, widgets, "team", "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "the namespace gone", func() bool {
		_, err := s.Get(ctx, kinds.NamespaceResource, "", "team", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
