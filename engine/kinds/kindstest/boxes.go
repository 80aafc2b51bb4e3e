package kindstest

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Boxes is the resource of the CRD BoxCRD makes.
var Boxes = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "boxes"}

// BoxCRD returns the CRD of the namespaced kind Box (example.setpoint.dev/v1,
// boxes) with openAPIV3Schema, YAML that follows "openAPIV3Schema:" (a flow
// value, or lines indented by 8).
func BoxCRD(t testing.TB, openAPIV3Schema string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: boxes.example.setpoint.dev}
spec:
  group: example.setpoint.dev
  scope: Namespaced
  names: {plural: boxes, singular: box, kind: Box}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: `+openAPIV3Schema+"\n"), &m); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

// EnumBoxSchema is the schema of Boxes whose spec.items is a list of
// strings, each one of enum values, and whose spec.counts is a list of
// integers at most 10.
func EnumBoxSchema(enum int) string {
	values := make([]string, enum)
	for i := range values {
		values[i] = fmt.Sprintf("value-%d", i)
	}
	return `
        type: object
        properties:
          spec:
            type: object
            properties:
              items: {type: array, items: {type: string, enum: [` + strings.Join(values, ", ") + `]}}
              counts: {type: array, items: {type: integer, maximum: 10}}`
}

// Box returns a Box whose spec.items holds n strings outside the enum of
// EnumBoxSchema.
func Box(name string, n int) *unstructured.Unstructured {
	items := make([]any, n)
	for i := range items {
		items[i] = fmt.Sprintf("bad-%d", i)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Box",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"items": items},
	}}
}
