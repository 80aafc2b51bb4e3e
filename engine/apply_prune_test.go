package engine

// The live object pruned by the current schema (review finding 3).

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

// thingCRD declares spec.a and spec.b (both strings).
var thingCRD = testsupport.CRD{Kind: "Thing",
	Schema: `{type: object, properties: {spec: {type: object, properties: {a: {type: string}, b: {type: string}}}}}`}

var things = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "things"}

func appliedThing(spec string) []byte {
	return []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Thing","metadata":{"name":"t1","namespace":"default"},"spec":` + spec + `}`)
}

// Finding 3: after the CRD drops a field from its schema, stored objects
// still carry it; the field managers see the live object pruned, as
// kube-apiserver's decoder gives it.
func TestApplyAfterSchemaChange(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	if _, err := s.Create(ctx, kinds.CRDResource, thingCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, things, "default", "t1", appliedThing(`{"a":"1","b":"2"}`), applyOpts("m1", false)); err != nil {
		t.Fatal(err)
	}
	setVersions(t, s, "things.example.setpoint.dev", func(vs []any) {
		unstructured.RemoveNestedField(vs[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "b")
	})
	// A tracked update of the object that still holds spec.b is recorded.
	if _, err := s.Patch(ctx, things, "default", "t1", types.MergePatchType, []byte(`{"spec":{"a":"2"}}`), metav1.PatchOptions{FieldManager: "m2"}); err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	cur, _ := s.Get(ctx, things, "default", "t1", metav1.GetOptions{})
	if got := strings.Join(managers(cur), ","); got != "m1/Apply,m2/Update" {
		t.Errorf("managers after m2's merge patch = %v, want m1/Apply,m2/Update", got)
	}
	// So is an apply to it (the value m2 set: no conflict).
	out, _, err := s.Apply(ctx, things, "default", "t1", appliedThing(`{"a":"2"}`), applyOpts("m1", false))
	if err != nil {
		t.Fatalf("apply after the CRD dropped spec.b: %v", err)
	}
	if _, found, _ := unstructured.NestedString(out.Object, "spec", "b"); found {
		t.Errorf("spec.b kept by the apply: %v", out.Object["spec"])
	}
	if got := strings.Join(managers(out), ","); got != "m1/Apply,m2/Update" {
		t.Errorf("managers after the apply = %v, want m1/Apply,m2/Update", got)
	}
}
