package kinds

import (
	"fmt"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds on the schemas of a CRD, checked when it is created or changed, on
// top of Kubernetes' own validation (whose only bounds on a schema are those
// of its CEL rules, and the size of the CRD object).
const (
	// MaxEnumValues bounds the values of one enum. Each object value that
	// is not one of them gets an error listing them all (built twice, by
	// kube-openapi and as the field error), so this bounds the cost of one
	// such error; MaxValidationErrors bounds how many there are.
	MaxEnumValues = 1000
	// MaxSchemaDepth bounds the nesting of a schema (properties, items,
	// additionalProperties and the logical junctors each go one deeper):
	// every walk of a schema or of an object along it (validation,
	// defaulting, pruning, CEL) recurses that deep. The deepest schemas in
	// common use (pod templates inside workflow templates) stay well under
	// a third of it.
	MaxSchemaDepth = 128
)

// crdSchemaBounds checks every version's schema against MaxEnumValues and
// MaxSchemaDepth. An update is held to them only when the old CRD was: a
// CRD stored before them stays updatable, as Kubernetes ratchets new checks.
func crdSchemaBounds(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	errs := schemaBoundErrors(crd)
	if len(errs) > 0 && old != nil && len(schemaBoundErrors(old)) > 0 {
		return nil
	}
	return errs
}

func schemaBoundErrors(crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	var errs field.ErrorList
	for i, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		p := field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema")
		errs = append(errs, schemaBounds(v.Schema.OpenAPIV3Schema, p, 1)...)
	}
	return errs
}

// schemaBounds checks s, at depth depth, and what it nests.
func schemaBounds(s *apiextensionsv1.JSONSchemaProps, p *field.Path, depth int) field.ErrorList {
	if s == nil {
		return nil
	}
	if depth > MaxSchemaDepth {
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("the schema nests more than %d levels deep", MaxSchemaDepth))}
	}
	var errs field.ErrorList
	if len(s.Enum) > MaxEnumValues {
		errs = append(errs, field.TooMany(p.Child("enum"), len(s.Enum), MaxEnumValues))
	}
	d := depth + 1
	errs = append(errs, mapBounds(s.Properties, p.Child("properties"), d)...)
	errs = append(errs, mapBounds(s.PatternProperties, p.Child("patternProperties"), d)...)
	errs = append(errs, mapBounds(s.Definitions, p.Child("definitions"), d)...)
	if s.Items != nil {
		errs = append(errs, schemaBounds(s.Items.Schema, p.Child("items"), d)...)
		for i := range s.Items.JSONSchemas {
			errs = append(errs, schemaBounds(&s.Items.JSONSchemas[i], p.Child("items").Index(i), d)...)
		}
	}
	if s.AdditionalProperties != nil {
		errs = append(errs, schemaBounds(s.AdditionalProperties.Schema, p.Child("additionalProperties"), d)...)
	}
	if s.AdditionalItems != nil {
		errs = append(errs, schemaBounds(s.AdditionalItems.Schema, p.Child("additionalItems"), d)...)
	}
	for _, j := range []struct {
		name string
		list []apiextensionsv1.JSONSchemaProps
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}} {
		for i := range j.list {
			errs = append(errs, schemaBounds(&j.list[i], p.Child(j.name).Index(i), d)...)
		}
	}
	errs = append(errs, schemaBounds(s.Not, p.Child("not"), d)...)
	for _, k := range sortedKeys(s.Dependencies) {
		errs = append(errs, schemaBounds(s.Dependencies[k].Schema, p.Child("dependencies").Key(k), d)...)
	}
	return errs
}

func mapBounds(m map[string]apiextensionsv1.JSONSchemaProps, p *field.Path, depth int) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(m) {
		s := m[k]
		errs = append(errs, schemaBounds(&s, p.Key(k), depth)...)
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
