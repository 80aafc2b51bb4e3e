package kinds

import (
	"context"
	"fmt"
	"testing"

	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// BenchmarkInvalidItems measures the validation of a Box whose n list items
// all fail a 3-value enum, and the 422 made of its errors: "library" is the
// apiextensions validator and apierrors.NewInvalid, as the engine used them
// before the bound (quadratic in n), "bounded" is what the engine does now.
//
//	go test -run '^$' -bench BenchmarkInvalidItems -benchtime 1x ./engine/kinds/
func BenchmarkInvalidItems(b *testing.B) {
	r := NewRegistry()
	sv := serveEnumBoxes(b, r, 3)
	props, _, err := versionSchema(crdOf(b, r, "boxes.example.setpoint.dev"), "v1")
	if err != nil {
		b.Fatal(err)
	}
	lib, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		b.Fatal(err)
	}
	gk := sv.GVK().GroupKind()
	for _, n := range []int{1000, 2000, 4000, 20000} {
		obj := kindstest.Box("b", n).Object
		if n <= 4000 {
			b.Run(fmt.Sprintf("library/items=%d", n), func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					_ = apierrors.NewInvalid(gk, "b", apiservervalidation.ValidateCustomResource(nil, obj, lib)).Error()
				}
			})
		}
		b.Run(fmt.Sprintf("bounded/items=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				v := sv.createValidation.validator.withContext(context.Background())
				_ = newInvalid(gk, "b", apiservervalidation.ValidateCustomResource(nil, obj, v)).Error()
			}
		})
	}
}
