package engine

// managedFields at versions a CRD no longer serves (review finding 2).

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// twoVersionCRD serves v1beta1 and v1 (conversion None).
var twoVersionCRD = testsupport.CRD{Kind: "Gizmo",
	Schema:   `{type: object, properties: {spec: {type: object, properties: {a: {type: string}, b: {type: string}}}}}`,
	Versions: []testsupport.Version{{Name: "v1beta1"}, {Name: "v1", Storage: true}}}

func gizmos(v string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "example.setpoint.dev", Version: v, Resource: "gizmos"}
}

func appliedGizmo(v, spec string) []byte {
	return []byte(`{"apiVersion":"example.setpoint.dev/` + v + `","kind":"Gizmo","metadata":{"name":"g","namespace":"default"},"spec":` + spec + `}`)
}

// setVersions replaces the spec.versions of the stored CRD named name with
// edit's result and updates it.
func setVersions(t *testing.T, s *Service, name string, edit func(vs []any)) {
	t.Helper()
	ctx := context.Background()
	crd, err := s.Get(ctx, kinds.CRDResource, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vs, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	edit(vs)
	if err := unstructured.SetNestedSlice(crd.Object, vs, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, kinds.CRDResource, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Finding 2: managedFields recorded at a version that is no longer served
// (or no longer listed at all) must not break apply.
func TestApplyAfterVersionUnserved(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	if _, err := s.Create(ctx, kinds.CRDResource, twoVersionCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, gizmos("v1beta1"), "default", "g", appliedGizmo("v1beta1", `{"a":"1"}`), applyOpts("old-client", false)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, gizmos("v1"), "default", "g", appliedGizmo("v1", `{"b":"1"}`), applyOpts("new-client", false)); err != nil {
		t.Fatal(err)
	}
	setVersions(t, s, "gizmos.example.setpoint.dev", func(vs []any) { vs[0].(map[string]any)["served"] = false })

	o, _, err := s.Apply(ctx, gizmos("v1"), "default", "g", appliedGizmo("v1", `{"b":"2"}`), applyOpts("new-client", false))
	if err != nil {
		t.Fatalf("apply at v1 after v1beta1 stopped being served: %v", err)
	}
	if got := managers(o); len(got) != 2 {
		t.Errorf("managers after apply = %v, want old-client and new-client", got)
	}
	// A tracked update is recorded too.
	o, err = s.Patch(ctx, gizmos("v1"), "default", "g", types.MergePatchType, []byte(`{"spec":{"a":"2"}}`), metav1.PatchOptions{FieldManager: "patcher"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(managers(o), ","); !strings.Contains(got, "patcher/Update") {
		t.Errorf("managers after a merge patch = %v, want patcher's Update", got)
	}
	for _, e := range o.GetManagedFields() {
		if e.Manager == "old-client" && e.APIVersion != "example.setpoint.dev/v1beta1" {
			t.Errorf("old-client's entry = %+v, want it kept at v1beta1", e)
		}
	}

	// A version the CRD no longer lists: its managers are dropped.
	// (status.storedVersions holds v1 only.)
	crd, _ := s.Get(ctx, kinds.CRDResource, "", "gizmos.example.setpoint.dev", metav1.GetOptions{})
	vs, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if err := unstructured.SetNestedSlice(crd.Object, vs[1:], "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, kinds.CRDResource, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("drop v1beta1 from spec.versions: %v", err)
	}
	o, _, err = s.Apply(ctx, gizmos("v1"), "default", "g", appliedGizmo("v1", `{"b":"3"}`), applyOpts("new-client", false))
	if err != nil {
		t.Fatalf("apply at v1 after v1beta1 was removed: %v", err)
	}
	for _, e := range o.GetManagedFields() {
		if e.APIVersion == "example.setpoint.dev/v1beta1" {
			t.Errorf("entry at the removed version kept: %+v", e)
		}
	}
}
