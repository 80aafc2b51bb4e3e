package engine

// Field managers kept across CRD writes (review finding 9).

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// Finding 9: CRD writes that change nothing the field managers are built
// from (labels, status) reuse them; a schema change rebuilds them.
func TestCRDFieldManagersReused(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	gr := widgets.GroupResource()
	before := s.reg.ByGroupResource(gr)
	if before == nil || before.FieldManager("") == nil {
		t.Fatal("widgets not served with field managers")
	}
	if _, err := s.Patch(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	after := s.reg.ByGroupResource(gr)
	if after == before {
		t.Fatal("the CRD write did not rebuild the served resource")
	}
	if after.FieldManager("") != before.FieldManager("") {
		t.Error("a label-only CRD write rebuilt the field managers")
	}
	if _, err := s.Patch(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", types.MergePatchType,
		[]byte(`{"status":{"conditions":[]}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if s.reg.ByGroupResource(gr).FieldManager("") != before.FieldManager("") {
		t.Error("a status-only CRD write rebuilt the field managers")
	}
	setVersions(t, s, "widgets.example.setpoint.dev", func(vs []any) {
		props, _, _ := unstructured.NestedMap(vs[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties")
		props["color"] = map[string]any{"type": "string"}
		_ = unstructured.SetNestedMap(vs[0].(map[string]any), props, "schema", "openAPIV3Schema", "properties", "spec", "properties")
	})
	changed := s.reg.ByGroupResource(gr)
	if changed.FieldManager("") == before.FieldManager("") {
		t.Fatal("a schema change kept the old field managers")
	}
	// The new schema's field is applied through the rebuilt managers.
	cfg := []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"c","namespace":"default"},"spec":{"name":"C","size":"small","color":"red"}}`)
	if _, _, err := s.Apply(ctx, widgets, "default", "c", cfg, applyOpts("alice", false)); err != nil {
		t.Fatalf("apply of the new field: %v", err)
	}
}
