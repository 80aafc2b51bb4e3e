package kinds

import "testing"

// BenchmarkCoerceMetaOwned measures coercing the metadata of a child a
// controller creates (name, namespace, labels and one controller owner
// reference), as coerce does on every create and update of it.
func BenchmarkCoerceMetaOwned(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		obj := map[string]any{"metadata": map[string]any{
			"name": "w-provision", "namespace": "default", "labels": map[string]any{"app": "widget"},
			"ownerReferences": []any{map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
				"name": "w", "uid": "2f9d1c6e-0b7a-4a53-9c1e-8d6f0e4b2a71", "controller": true, "blockOwnerDeletion": true}},
		}}
		canonical, meta, found, _, err := objectMeta(obj)
		if err != nil {
			b.Fatal(err)
		}
		if err := setObjectMeta(obj, canonical, meta, found); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidationMetaOwned measures reading the same child's metadata
// as an ObjectMeta for validation.
func BenchmarkValidationMetaOwned(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		obj := map[string]any{"metadata": map[string]any{
			"name": "w-provision", "namespace": "default", "labels": map[string]any{"app": "widget"},
			"ownerReferences": []any{map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
				"name": "w", "uid": "2f9d1c6e-0b7a-4a53-9c1e-8d6f0e4b2a71", "controller": true, "blockOwnerDeletion": true}},
		}}
		if _, errs := validationMeta(obj); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
