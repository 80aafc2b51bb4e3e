package kinds

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// defaultingBoxSchema is a Box schema with defaults at every depth, in
// properties, items and additionalProperties, beside nodes without any.
const defaultingBoxSchema = `
        type: object
        properties:
          spec:
            type: object
            properties:
              plain: {type: string}
              mode: {type: string, default: fast}
              nested:
                type: object
                properties:
                  a: {type: integer}
                  b: {type: integer, default: 2}
                  deep: {type: object, properties: {c: {type: string, default: c}, d: {type: string}}}
              none: {type: object, properties: {x: {type: string}, y: {type: array, items: {type: string}}}}
              list: {type: array, items: {type: object, properties: {n: {type: integer, default: 1}, m: {type: string}}}}
              strings: {type: array, items: {type: string}}
              labels: {type: object, additionalProperties: {type: object, properties: {v: {type: string, default: v}}}}
              counts: {type: object, additionalProperties: {type: integer}}
              nonNull: {type: object, default: {z: 1}, properties: {z: {type: integer}}}`

// defaultingBoxSpecs are specs of Boxes of defaultingBoxSchema: missing,
// null and given values where it has defaults.
var defaultingBoxSpecs = []string{
	`{}`,
	`{"plain": "p", "mode": null, "nested": {}, "none": {"x": "x", "y": ["a", null]}}`,
	`{"nested": {"a": 1, "deep": {}}, "list": [{}, {"n": 5}, null, {"m": "m"}], "strings": ["a", null]}`,
	`{"labels": {"a": {}, "b": {"v": "w"}, "c": null}, "counts": {"a": 1, "b": null}, "nonNull": null}`,
	`{"nested": {"b": null, "deep": null}, "list": [], "labels": {}}`,
}

// Defaulting with the skeleton of a schema gives what defaulting with the
// schema gives.
func TestDefaultingSchemaDefaultsAlike(t *testing.T) {
	r := NewRegistry()
	sv, ok := serveBoxes(t, r, defaultingBoxSchema)
	if !ok {
		t.Fatal("boxes not served")
	}
	skeleton := defaultingSchema(sv.structural)
	if skeleton == nil || skeleton.Properties["spec"].Properties["none"].Properties != nil || skeleton.Properties["spec"].Properties["counts"].AdditionalProperties != nil {
		t.Fatalf("skeleton keeps what has no default: %+v", skeleton)
	}
	if _, ok := skeleton.Properties["spec"].Properties["plain"]; ok {
		t.Error("skeleton keeps spec.plain")
	}
	for i, spec := range defaultingBoxSpecs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			obj := map[string]any{"spec": nil}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON([]byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","spec":` + spec + `}`)); err != nil {
				t.Fatal(err)
			}
			obj = u.Object
			want, got := runtime.DeepCopyJSON(obj), runtime.DeepCopyJSON(obj)
			structuraldefaulting.Default(want, sv.structural)
			structuraldefaulting.Default(got, skeleton)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-schema +skeleton):\n%s", diff)
			}
		})
	}
}
