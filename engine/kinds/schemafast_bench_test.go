package kinds

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
)

// BenchmarkValidateWidgetStatus is the validation of the status write a
// controller makes for the example Widget (a date-time, int64s, conditions
// with their date-times), through the fast check and through the library
// alone, in one run.
func BenchmarkValidateWidgetStatus(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "widget", "crd.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		b.Fatal(err)
	}
	r := NewRegistry()
	serveCRD(b, r, &unstructured.Unstructured{Object: crd})
	sv, ok := r.Get(widgets)
	if !ok {
		b.Fatal("widgets not served")
	}
	old, ok := objjson.Decode([]byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w1","namespace":"default",` +
		`"uid":"0b6f3c9e-5d6c-4f0a-9a53-0e6f0f4d1a11","generation":1,"resourceVersion":"42","creationTimestamp":"2026-11-21T04:00:00Z"},` +
		`"spec":{"name":"Widget 1","size":"medium"},"status":{"state":"Provisioning","observedGeneration":1,"conditions":[` +
		`{"type":"Ready","status":"False","reason":"Provisioning","message":"provisioning","observedGeneration":1,"lastTransitionTime":"2026-11-21T04:00:00Z"}]}}`))
	if !ok {
		b.Fatal("decode")
	}
	cur := runtime.DeepCopyJSON(old)
	cur["status"] = map[string]any{"state": "Ready", "provision": "w1", "capacity": int64(4), "lastProvisioned": "2026-11-21T04:00:01Z",
		"observedGeneration": int64(1), "conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Reconciled",
			"message": "reconciled", "observedGeneration": int64(1), "lastTransitionTime": "2026-11-21T04:00:01Z"}}}
	o, u := &unstructured.Unstructured{Object: old}, &unstructured.Unstructured{Object: cur}
	cv := sv.createValidation
	for _, mode := range []string{"fast", "library"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "library" {
				fast := cv.statusValidator.fast
				cv.statusValidator.fast = nil
				b.Cleanup(func() { cv.statusValidator.fast = fast })
			} else if !cv.statusValidator.fast.valid(cur["status"]) {
				b.Fatal("the fast check does not accept the Widget's status")
			}
			b.ReportAllocs()
			for b.Loop() {
				if errs := cv.validateStatusUpdate(context.Background(), u, o); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}
