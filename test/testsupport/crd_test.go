package testsupport

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCRDObject(t *testing.T) {
	got := CRD{Kind: "Widget", Status: true, ShortNames: []string{"wd"},
		Scale: "{specReplicasPath: .spec.replicas}", SelectableFields: []string{".spec.size"},
		Schema:  "type: object\nproperties:\n  spec: {type: object}\n",
		Columns: `[{"name":"Size","type":"string","jsonPath":".spec.size"}]`}.Object()
	var want map[string]any
	if err := json.Unmarshal([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.example.setpoint.dev"},
"spec":{"group":"example.setpoint.dev","scope":"Namespaced",
 "names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList","shortNames":["wd"]},
 "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{},"scale":{"specReplicasPath":".spec.replicas"}},
  "selectableFields":[{"jsonPath":".spec.size"}],
  "additionalPrinterColumns":[{"name":"Size","type":"string","jsonPath":".spec.size"}],
  "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object"}}}}}]}}`), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Object (-want +got):\n%s", diff)
	}
}

func TestCRDDefaults(t *testing.T) {
	c := CRD{Kind: "Box", Group: "limits.example.dev", Plural: "boxes", Scope: "Cluster"}
	if c.Name() != "boxes.limits.example.dev" {
		t.Errorf("Name = %q", c.Name())
	}
	spec := c.Object()["spec"].(map[string]any)
	if spec["scope"] != "Cluster" {
		t.Errorf("scope = %v", spec["scope"])
	}
	v := spec["versions"].([]any)[0].(map[string]any)
	if _, ok := v["subresources"]; ok {
		t.Errorf("subresources without Status: %v", v["subresources"])
	}
	var def any
	_ = json.Unmarshal([]byte(PreserveSpecAndStatus), &def)
	if diff := cmp.Diff(def, v["schema"].(map[string]any)["openAPIV3Schema"]); diff != "" {
		t.Errorf("default schema (-want +got):\n%s", diff)
	}
}

func TestCRDVersions(t *testing.T) {
	got := CRD{Kind: "Gizmo", Status: true, Schema: `{"type":"object"}`, Versions: []Version{
		{Name: "v1beta1", Schema: "{type: object, x-kubernetes-preserve-unknown-fields: true}"},
		{Name: "v1", Storage: true},
	}}.Object()["spec"].(map[string]any)["versions"]
	var want any
	if err := json.Unmarshal([]byte(`[
 {"name":"v1beta1","served":true,"storage":false,"subresources":{"status":{}},
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
 {"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
  "schema":{"openAPIV3Schema":{"type":"object"}}}]`), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
}
