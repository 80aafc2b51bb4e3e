package kinds

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

func enumSchema(n int) string {
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("v%d", i)
	}
	return `{type: object, properties: {spec: {type: object, properties: {anyOf-free: {type: string, enum: [` + strings.Join(values, ",") + `]}}}}}`
}

func deepSchema(depth int) string {
	s := `{type: string}`
	for range depth - 1 {
		s = `{type: object, properties: {a: ` + s + `}}`
	}
	return s
}

// validCRDCreate runs what a create of the CRD obj runs before it is
// stored: its status prepared, then the kind's validation; it returns the
// Invalid error, nil when the CRD is valid.
func validCRDCreate(t *testing.T, obj map[string]any) error {
	t.Helper()
	ctx := context.Background()
	r := NewRegistry()
	k, ok := r.Get(CRDResource)
	if !ok {
		t.Fatal("CustomResourceDefinitions not served")
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := k.Coerce(u); err != nil {
		t.Fatal(err)
	}
	k.PrepareForCreate(ctx, u)
	if err := r.PrepareCRD(u.Object); err != nil {
		t.Fatal(err)
	}
	return k.Invalid(u.GetName(), k.ValidateCreate(ctx, u))
}

func TestCRDSchemaBounds(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         string // in the error; "" for accepted
	}{
		{"enum at the limit", enumSchema(MaxEnumValues), ""},
		{"enum past the limit", enumSchema(MaxEnumValues + 1),
			"spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[anyOf-free].enum: Too many: 1001: must have at most 1000 items"},
		{"depth at the limit", deepSchema(MaxSchemaDepth), ""},
		{"depth past the limit", deepSchema(MaxSchemaDepth + 1), "nests more than 128 levels deep"},
		{"enum in a junctor", `{type: object, properties: {spec: {type: string}}, anyOf: [{properties: {spec: {enum: [` + strings.Repeat("a,", MaxEnumValues) + `b]}}}]}`,
			"openAPIV3Schema.anyOf[0].properties[spec].enum: Too many"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validCRDCreate(t, testsupport.CRD{Kind: "Box", Plural: "boxes", Schema: tc.schema}.Object())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("create: %v", err)
			case tc.want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("create: %v, want Invalid with %q", err, tc.want)
			}
		})
	}
}

// A CRD stored before the bounds stays updatable; one within them may not
// be changed past them.
func TestCRDSchemaBoundsRatchet(t *testing.T) {
	decode := func(schema string) *apiextensionsv1.CustomResourceDefinition {
		crd, err := CRDFromMap(testsupport.CRD{Kind: "Box", Plural: "boxes", Schema: schema}.Object())
		if err != nil {
			t.Fatal(err)
		}
		return crd
	}
	big, small := decode(enumSchema(MaxEnumValues+5)), decode(enumSchema(3))
	if errs := crdSchemaBounds(big, big); len(errs) != 0 {
		t.Errorf("update of a CRD already past the bounds: %v", errs)
	}
	if errs := crdSchemaBounds(big, small); len(errs) != 1 {
		t.Errorf("update past the bounds: %v, want one error", errs)
	}
}
