package engine

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

func crdCondition(t *testing.T, s *Service, name, typ string) string {
	t.Helper()
	crd, err := s.Get(context.Background(), kinds.CRDResource, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == typ {
			return m["status"].(string)
		}
	}
	return ""
}

func TestCRDUpdateAndConflicts(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	// Widen the enum and add a served version: both take effect at once.
	crd, err := s.Get(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	v1 := versions[0].(map[string]any)
	enum := []any{"small", "medium", "large", "huge"}
	if err := unstructured.SetNestedSlice(v1, enum, "schema", "openAPIV3Schema", "properties", "spec", "properties", "size", "enum"); err != nil {
		t.Fatal(err)
	}
	v2 := unstructured.Unstructured{Object: v1}
	v2c := v2.DeepCopy().Object
	v2c["name"], v2c["storage"] = "v2", false
	_ = unstructured.SetNestedSlice(crd.Object, []any{v1, v2c}, "spec", "versions")
	if _, err := s.Update(ctx, kinds.CRDResource, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, widgets, widget("big", "huge", nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create with the widened enum: %v", err)
	}
	v2gvr := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v2", Resource: "widgets"}
	if got, err := s.Get(ctx, v2gvr, "default", "big", metav1.GetOptions{}); err != nil || got.GetAPIVersion() != "example.setpoint.dev/v2" {
		t.Fatalf("read at the new version: %v, %v", got, err)
	}

	// A second CRD of the group that claims the same kind is not served.
	clash := testsupport.CRD{Kind: "Widget", Plural: "otherwidgets", Singular: "otherwidget", Schema: `{type: object}`}.Unstructured()
	if _, err := s.Create(ctx, kinds.CRDResource, clash, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := crdCondition(t, s, "otherwidgets.example.setpoint.dev", "NamesAccepted"); got != "False" {
		t.Errorf("NamesAccepted of the clashing CRD = %q, want False", got)
	}
	if _, ok := s.Resource(schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "otherwidgets"}); ok {
		t.Error("the clashing CRD is served")
	}
	// An invalid CRD is rejected with the apiextensions validation.
	bad := kindstest.FromYAML(t, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: wrong.example.setpoint.dev}\nspec:\n  group: example.setpoint.dev\n  scope: Namespaced\n  names: {plural: things, kind: Thing}\n  versions: []\n")
	if _, err := s.Create(ctx, kinds.CRDResource, bad, metav1.CreateOptions{}); err == nil {
		t.Error("an invalid CRD was accepted")
	}
}

func TestCRDDryRunDeleteKeepsServing(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	mustCreate(t, s, widget("stays", "small", nil))
	if err := s.Delete(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Resource(widgets); !ok {
		t.Fatal("a dry-run delete of the CRD stopped serving it")
	}
	if _, err := s.Get(ctx, widgets, "default", "stays", metav1.GetOptions{}); err != nil {
		t.Fatalf("a dry-run delete of the CRD removed its objects: %v", err)
	}
}
