package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

func namespaceObj(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	u.SetName(name)
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

// TestNamespaceNameLabel: every namespace carries kubernetes.io/metadata.name
// set to its name, which a client can neither change nor remove.
func TestNamespaceNameLabel(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	want := func(u *unstructured.Unstructured, name string) {
		t.Helper()
		if got := u.GetLabels()[corev1.LabelMetadataName]; got != name {
			t.Errorf("%s: label %s = %q, want %q (labels %v)", u.GetName(), corev1.LabelMetadataName, got, name, u.GetLabels())
		}
	}
	def, err := s.Get(ctx, kinds.NamespaceResource, "", kinds.DefaultNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want(def, kinds.DefaultNamespace)

	ns, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj("qa", map[string]string{corev1.LabelMetadataName: "other", "team": "a"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want(ns, "qa")
	if ns.GetLabels()["team"] != "a" {
		t.Errorf("labels = %v, want team=a kept", ns.GetLabels())
	}
	dry, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj("qa-dry", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	want(dry, "qa-dry")
	gen := namespaceObj("", nil)
	gen.SetGenerateName("gen-")
	g, err := s.Create(ctx, kinds.NamespaceResource, gen, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want(g, g.GetName())

	// An update that drops or changes it gets it back.
	ns.SetLabels(map[string]string{"team": "b"})
	ns, err = s.Update(ctx, kinds.NamespaceResource, ns, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want(ns, "qa")
	ns.SetLabels(map[string]string{corev1.LabelMetadataName: "x"})
	ns, err = s.Update(ctx, kinds.NamespaceResource, ns, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want(ns, "qa")
	stored, err := s.Get(ctx, kinds.NamespaceResource, "", "qa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want(stored, "qa")

	l, err := s.List(ctx, kinds.NamespaceResource, "", metav1.ListOptions{LabelSelector: corev1.LabelMetadataName + "=qa"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].GetName() != "qa" {
		t.Errorf("list -l %s=qa = %d items, want qa", corev1.LabelMetadataName, len(l.Items))
	}
}

// TestNamespaceNameLabelOnStored: namespaces stored without the label (by
// an older server) have it once a server has started on the store.
func TestNamespaceNameLabelOnStored(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// What an older server stored: default and one more, without the label.
	for _, name := range []string{kinds.DefaultNamespace, "old"} {
		doc := `{"apiVersion":"v1","kind":"Namespace","metadata":{"creationTimestamp":"2026-01-01T00:00:00Z","finalizers":["kubernetes"],"labels":{"team":"a"},"name":"` +
			name + `","uid":"uid-` + name + `"},"spec":{},"status":{"phase":"Active"}}`
		if _, err := db.Create(ctx, store.ObjectKey("", "namespaces", "", name), []byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(ctx, Options{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{kinds.DefaultNamespace, "old"} {
		ns, err := s.Get(ctx, kinds.NamespaceResource, "", name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ns.GetLabels(); got[corev1.LabelMetadataName] != name || got["team"] != "a" {
			t.Errorf("%s: labels = %v, want %s=%s and team=a", name, got, corev1.LabelMetadataName, name)
		}
		if string(ns.GetUID()) != "uid-"+name {
			t.Errorf("%s: uid = %s, want the stored one", name, ns.GetUID())
		}
	}
	l, err := s.List(ctx, kinds.NamespaceResource, "", metav1.ListOptions{LabelSelector: corev1.LabelMetadataName + "=old"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Errorf("list -l %s=old = %d items, want 1", corev1.LabelMetadataName, len(l.Items))
	}
}

func namesOf(l *unstructured.UnstructuredList) []string {
	var out []string
	for _, it := range l.Items {
		out = append(out, it.GetName())
	}
	return out
}

// TestNamespaceFieldSelectorPhase: namespaces take the field selector
// status.phase (and metadata.name), in lists and watches.
func TestNamespaceFieldSelectorPhase(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	for _, n := range []string{"ns-a", "ns-b"} {
		if _, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj(n, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.Watch(ctx, kinds.NamespaceResource, "", metav1.ListOptions{FieldSelector: "status.phase=Active,metadata.name!=default"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// ns-a, ns-b and the system namespaces but default.
	for range 2 + len(systemNamespaces) - 1 {
		if ev := nextEvent(t, w); ev.Type != watch.Added {
			t.Fatalf("initial event %s, want ADDED", ev.Type)
		}
	}
	// No collector runs here: a deleted namespace stays Terminating.
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "ns-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w); ev.Type != watch.Deleted || ev.Object.(*unstructured.Unstructured).GetName() != "ns-b" {
		t.Errorf("after ns-b went Terminating: %s %v, want DELETED ns-b", ev.Type, ev.Object)
	}
	for _, tc := range []struct{ sel, want string }{
		{"status.phase=Terminating", "[ns-b]"},
		{"status.phase=Active", "[default kube-node-lease kube-public kube-system ns-a]"},
		{"status.phase!=Active", "[ns-b]"},
		{"status.phase=Active,metadata.name=ns-a", "[ns-a]"},
		{"metadata.name=ns-b", "[ns-b]"},
	} {
		l, err := s.List(ctx, kinds.NamespaceResource, "", metav1.ListOptions{FieldSelector: tc.sel})
		if err != nil {
			t.Errorf("%s: %v", tc.sel, err)
			continue
		}
		if got := fmt.Sprint(namesOf(l)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.sel, got, tc.want)
		}
		j, err := s.ListJSON(ctx, kinds.NamespaceResource, "", metav1.ListOptions{FieldSelector: tc.sel, Limit: 1})
		if err != nil || len(j.Items) != 1 {
			t.Errorf("%s: ListJSON limit 1: %d items, %v", tc.sel, len(j.Items), err)
		}
	}
	// Other fields are refused as before, and status.phase only for namespaces.
	for _, tc := range []struct {
		gvr schema.GroupVersionResource
		sel string
	}{{kinds.NamespaceResource, "spec.finalizers=kubernetes"}, {widgets, "status.phase=Active"}} {
		_, err := s.List(ctx, tc.gvr, "", metav1.ListOptions{FieldSelector: tc.sel})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported: "+strings.Split(tc.sel, "=")[0]) {
			t.Errorf("%s %s: %v, want 400 field label not supported", tc.gvr.Resource, tc.sel, err)
		}
	}
}

// TestNamespaceSpecFinalizers: as Kubernetes' namespace strategy does, a
// created namespace has the finalizer kubernetes in spec.finalizers, after
// those the client gave, and no update, patch or apply changes them; a
// deleted namespace is marked Terminating and held for the garbage
// collector by them alone, metadata.finalizers left as they were.
func TestNamespaceSpecFinalizers(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	specFins := func(u *unstructured.Unstructured) []string {
		t.Helper()
		fins, _, err := unstructured.NestedStringSlice(u.Object, "spec", "finalizers")
		if err != nil {
			t.Fatal(err)
		}
		return fins
	}
	check := func(what string, u *unstructured.Unstructured, want ...string) {
		t.Helper()
		if got := specFins(u); !slices.Equal(got, want) {
			t.Errorf("%s: spec.finalizers = %q, want %q", what, got, want)
		}
	}
	def, err := s.Get(ctx, kinds.NamespaceResource, "", kinds.DefaultNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("default", def, "kubernetes")

	ns, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj("fin", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("create", ns, "kubernetes")
	given := namespaceObj("given", nil)
	given.Object["spec"] = map[string]any{"finalizers": []any{"example.com/hold"}}
	g, err := s.Create(ctx, kinds.NamespaceResource, given, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("create with a finalizer", g, "example.com/hold", "kubernetes")

	delete(ns.Object, "spec")
	if ns, err = s.Update(ctx, kinds.NamespaceResource, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	check("update without spec", ns, "kubernetes")
	p, err := s.Patch(ctx, kinds.NamespaceResource, "", "fin", types.MergePatchType, []byte(`{"spec":{"finalizers":["example.com/other"]}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("merge patch", p, "kubernetes")
	force := true
	a, _, err := s.Apply(ctx, kinds.NamespaceResource, "", "fin", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"fin"},"spec":{"finalizers":[]}}`),
		metav1.PatchOptions{FieldManager: "test", Force: &force})
	if err != nil {
		t.Fatal(err)
	}
	check("apply", a, "kubernetes")

	out, deleted, err := s.DeleteObject(ctx, kinds.NamespaceResource, "", "fin", metav1.DeleteOptions{})
	if err != nil || deleted {
		t.Fatalf("delete = %v, %v; want the namespace kept, Terminating", deleted, err)
	}
	check("delete", out, "kubernetes")
	// As in Kubernetes, spec.finalizers hold it: metadata.finalizers do
	// not carry kubernetes, and no grace period is set.
	if phase, _, _ := unstructured.NestedString(out.Object, "status", "phase"); phase != string(corev1.NamespaceTerminating) ||
		out.GetDeletionTimestamp() == nil || len(out.GetFinalizers()) != 0 || out.GetDeletionGracePeriodSeconds() != nil {
		t.Errorf("deleted namespace: phase %q, deletionTimestamp %v, finalizers %q, grace %v; want Terminating, marked, held by spec.finalizers only",
			phase, out.GetDeletionTimestamp(), out.GetFinalizers(), out.GetDeletionGracePeriodSeconds())
	}
}

// TestNamespaceSpecFinalizersOnStored: a live namespace an older server
// stored without spec.finalizers has kubernetes in them once a server has
// started on the store, as if created now, so that a delete holds it
// until the garbage collector has emptied it (rather than letting it go at
// once, its content left behind). A deleted one is left as it is.
func TestNamespaceSpecFinalizersOnStored(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	const meta = `"creationTimestamp":"2026-01-01T00:00:00Z","labels":{"kubernetes.io/metadata.name":"%[1]s"},"name":"%[1]s","uid":"uid-%[1]s"`
	for name, doc := range map[string]string{
		"old":   `{"apiVersion":"v1","kind":"Namespace","metadata":{` + meta + `},"spec":{},"status":{"phase":"Active"}}`,
		"going": `{"apiVersion":"v1","kind":"Namespace","metadata":{` + meta + `,"deletionTimestamp":"2026-01-01T00:00:00Z"},"status":{"phase":"Terminating"}}`,
	} {
		if _, err := db.Create(ctx, store.ObjectKey("", "namespaces", "", name), []byte(fmt.Sprintf(doc, name))); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(ctx, Options{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{"old": {"kubernetes"}, "going": nil} {
		ns, err := s.Get(ctx, kinds.NamespaceResource, "", name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds.NamespaceSpecFinalizers(ns.Object); !slices.Equal(got, want) {
			t.Errorf("%s: spec.finalizers = %q, want %q", name, got, want)
		}
	}
	out, deleted, err := s.DeleteObject(ctx, kinds.NamespaceResource, "", "old", metav1.DeleteOptions{})
	if err != nil || deleted || !slices.Equal(kinds.NamespaceSpecFinalizers(out.Object), []string{"kubernetes"}) {
		t.Errorf("delete of the older server's namespace = %v, %v, spec.finalizers %q; want it held by kubernetes",
			deleted, err, kinds.NamespaceSpecFinalizers(out.Object))
	}
}
