package kindstest

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Boxes is the resource of the Box kind the tests serve with
// testsupport.CRD{Kind: "Box", Plural: "boxes", Schema: ...}.
var Boxes = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "boxes"}

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
