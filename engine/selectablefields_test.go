package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

var sfGadgets = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "gadgets"}

var sfGadgetCRD = testsupport.CRD{Kind: "Gadget", SelectableFields: []string{".spec.color", ".spec.count", ".spec.enabled"},
	Schema: `{type: object, properties: {spec: {type: object, properties: {
  color: {type: string}, count: {type: integer}, enabled: {type: boolean}, size: {type: string}}}}}`}

func sfGadget(name, color string, count int64, on bool, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"color": color, "count": count, "enabled": on, "size": "s"},
	}}
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

// TestSelectableFields: a field selector on a custom resource may read the
// selectableFields its CRD declares for the served version (string, integer
// and boolean fields), in lists and watches; other fields are refused.
func TestSelectableFields(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	if _, err := s.Create(ctx, kinds.CRDResource, sfGadgetCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		out, err := s.Create(ctx, sfGadgets, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	create(sfGadget("g1", "c1", 1, true, map[string]string{"env": "dev"}))
	create(sfGadget("g2", "c2", 2, false, nil))
	create(sfGadget("g3", "c1", 3, false, nil))

	w, err := s.Watch(ctx, sfGadgets, "default", metav1.ListOptions{FieldSelector: "spec.color=c1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	for _, tc := range []struct{ labels, fields, want string }{
		{"", "spec.color=c1", "[g1 g3]"},
		{"", "spec.color!=c1", "[g2]"},
		{"", "spec.count=2", "[g2]"},
		{"", "spec.enabled=true", "[g1]"},
		{"", "spec.enabled=false,spec.color=c1", "[g3]"},
		{"", "spec.color=c1,metadata.name!=g1", "[g3]"},
		{"env=dev", "spec.color=c1", "[g1]"},
		{"", "spec.color=none", "[]"},
	} {
		l, err := s.List(ctx, sfGadgets, "default", metav1.ListOptions{LabelSelector: tc.labels, FieldSelector: tc.fields})
		if err != nil {
			t.Errorf("list %s %s: %v", tc.labels, tc.fields, err)
			continue
		}
		var names []string
		for _, it := range l.Items {
			names = append(names, it.GetName())
		}
		if got := fmt.Sprint(names); got != tc.want {
			t.Errorf("list -l %q --field-selector %q = %s, want %s", tc.labels, tc.fields, got, tc.want)
		}
		j, err := s.ListJSON(ctx, sfGadgets, "", metav1.ListOptions{LabelSelector: tc.labels, FieldSelector: tc.fields})
		if err != nil || len(j.Items) != len(l.Items) {
			t.Errorf("ListJSON %s %s: %d items, %v; want %d", tc.labels, tc.fields, len(j.Items), err, len(l.Items))
		}
	}
	// Undeclared fields, and selectable fields of another kind, are refused
	// as before.
	for _, tc := range []struct {
		gvr schema.GroupVersionResource
		sel string
	}{{sfGadgets, "spec.size=s"}, {sfGadgets, "status.phase=x"}, {widgets, "spec.color=c1"}} {
		_, err := s.List(ctx, tc.gvr, "", metav1.ListOptions{FieldSelector: tc.sel})
		want := "field label not supported: " + strings.Split(tc.sel, "=")[0]
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s --field-selector %s: %v, want 400 %s", tc.gvr.Resource, tc.sel, err, want)
		}
		if _, err := s.Watch(ctx, tc.gvr, "", metav1.ListOptions{FieldSelector: tc.sel}); !apierrors.IsBadRequest(err) {
			t.Errorf("watch %s --field-selector %s: %v, want 400", tc.gvr.Resource, tc.sel, err)
		}
	}

	// The watch: g1 and g3 at first; g3 leaving the selection is DELETED,
	// g2 entering it ADDED, g1 changed MODIFIED.
	var initial []string
	for range 2 {
		ev := nextEvent(t, w)
		if ev.Type != watch.Added {
			t.Fatalf("initial event %s, want ADDED", ev.Type)
		}
		initial = append(initial, ev.Object.(*unstructured.Unstructured).GetName())
	}
	sort.Strings(initial)
	if fmt.Sprint(initial) != "[g1 g3]" {
		t.Errorf("initial events for %v, want g1 and g3", initial)
	}
	set := func(name string, field string, v any) {
		t.Helper()
		cur, err := s.Get(ctx, sfGadgets, "default", name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(cur.Object, v, "spec", field)
		if _, err := s.Update(ctx, sfGadgets, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	set("g3", "color", "c2")
	set("g2", "color", "c1")
	set("g1", "count", int64(10))
	set("g2", "size", "m") // g2 stays selected
	for _, want := range []struct {
		typ  watch.EventType
		name string
	}{{watch.Deleted, "g3"}, {watch.Added, "g2"}, {watch.Modified, "g1"}, {watch.Modified, "g2"}} {
		ev := nextEvent(t, w)
		if u, _ := ev.Object.(*unstructured.Unstructured); ev.Type != want.typ || u == nil || u.GetName() != want.name {
			t.Errorf("event %s %v, want %s %s", ev.Type, ev.Object, want.typ, want.name)
		}
	}
}

// TestSelectableFieldDefaultedOnRead: an object stored before its CRD gained
// a defaulted selectable field is selected by the default, as it reads.
func TestSelectableFieldDefaultedOnRead(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	crd := sfGadgetCRD.Unstructured()
	if _, err := s.Create(ctx, kinds.CRDResource, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, sfGadgets, sfGadget("old", "c1", 1, true, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crd, err := s.Get(ctx, kinds.CRDResource, "", crd.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := crd.Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
	v["selectableFields"] = append(v["selectableFields"].([]any), map[string]any{"jsonPath": ".spec.tier"})
	props := v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
	props["tier"] = map[string]any{"type": "string", "default": "gold"}
	if _, err := s.Update(ctx, kinds.CRDResource, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, sfGadgets, sfGadget("new", "c1", 1, true, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sel := range []string{"spec.tier=gold", "spec.tier=gold,spec.color=c1"} {
		l, err := s.List(ctx, sfGadgets, "default", metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 2 {
			t.Errorf("--field-selector %s: %d items, want old and new", sel, len(l.Items))
		}
	}
}
