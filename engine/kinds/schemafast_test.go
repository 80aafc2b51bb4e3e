package kinds

import (
	"math"
	"reflect"
	"slices"
	"testing"

	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// fastBoxSchema has every keyword the fast check decides, and some it
// leaves to the library (a format it does not decide, minimum, nullable,
// int-or-string, preserved unknown fields).
const fastBoxSchema = `
        type: object
        properties:
          spec:
            type: object
            required: [name]
            properties:
              name: {type: string, minLength: 2, maxLength: 4, pattern: '^[a-zé]+$'}
              size: {type: string, enum: [small, large]}
              count: {type: integer}
              ratio: {type: number}
              on: {type: boolean}
              tags: {type: array, items: {type: string, maxLength: 1}}
              labels: {type: object, additionalProperties: {type: string, enum: [x, z]}}
              nested: {type: object, properties: {deep: {type: string}}}
              when: {type: string, format: date-time}
              id: {type: string, format: uuid}
              big: {type: integer, format: int64}
              small: {type: integer, format: int32}
              addr: {type: string, format: ipv4}
              low: {type: integer, minimum: 2}
              maybe: {type: string, nullable: true}
              free: {type: object, x-kubernetes-preserve-unknown-fields: true}
              port: {x-kubernetes-int-or-string: true}`

// fastBoxes serves Boxes with fastBoxSchema and returns the fast check
// compiled for it and the library's validator of the same schema.
func fastBoxes(tb testing.TB) (*fastSchema, apiservervalidation.SchemaValidator) {
	tb.Helper()
	r := NewRegistry()
	sv, ok := serveBoxes(tb, r, fastBoxSchema)
	if !ok {
		tb.Fatal("boxes not served")
	}
	fast := sv.createValidation.validator.fast
	if fast == nil {
		tb.Fatal("no fast check compiled")
	}
	return fast, libraryBoxValidator(tb, r)
}

// The fast check against the library's validator on Boxes with random
// specs: every object it accepts is valid, and it accepts most valid ones
// (those that reach no keyword it leaves to the library).
func TestFastSchemaSweep(t *testing.T) {
	fast, lib := fastBoxes(t)
	rnd := kindstest.NewRand(6)
	rnd.Keys = []string{"name", "size", "count", "ratio", "on", "tags", "labels", "nested", "deep", "when", "id", "big", "small", "addr",
		"low", "maybe", "free", "port", "x", "bogus"}
	words := []any{"a", "ab", "abcde", "aB", "é", "éé", "small", "huge", "x", "y", "2026-11-21T07:00:00Z", "2026-11-21", "", int64(1), int64(7), 1.5, true, nil,
		int64(1) << 40, "0b6f3c9e-5d6c-4f0a-9a53-0e6f0f4d1a11", "10.0.0.1", []any{"a"}, map[string]any{"x": "y"}}
	fits := map[string][]any{
		"name": {"ab", "abcd", "éé"}, "size": {"small", "large"}, "count": {int64(3)}, "ratio": {int64(2), 0.5},
		"on": {true, false}, "tags": {[]any{}, []any{"a", "b"}}, "labels": {map[string]any{"a": "x", "b": "z"}},
		"nested": {map[string]any{"deep": "v"}, map[string]any{"other": int64(1)}},
		"when":   {"2026-11-21T07:00:00Z", "2026-11-21T07:00:00.5+01:00"}, "id": {"0b6f3c9e-5d6c-4f0a-9a53-0e6f0f4d1a11"},
		"big": {int64(1) << 40, int64(-3)}, "small": {int64(7), int64(-1 << 31)}, "addr": {"10.0.0.1"},
		"low": {int64(2)}, "maybe": {"m", nil}, "free": {map[string]any{"any": []any{int64(1)}}}, "port": {int64(80), "http"},
		"deep": {"v"}, "x": {"anything"}, "bogus": {int64(1)},
	}
	value := func(k string) any {
		if rnd.IntN(16) == 0 {
			return words[rnd.IntN(len(words))]
		}
		return fits[k][rnd.IntN(len(fits[k]))]
	}
	var accepted, unsure, invalid int
	for range sweep {
		spec := map[string]any{}
		for _, k := range rnd.Keys {
			// Keys the library leaves to the library come one time in
			// eight, so that most valid objects reach none of them.
			leave := slices.Contains([]string{"addr", "low", "maybe", "port"}, k)
			if leave && rnd.IntN(8) != 0 || !leave && rnd.IntN(3) == 0 {
				continue
			}
			spec[k] = runtime.DeepCopyJSONValue(value(k)) // Mutate changes it
		}
		if rnd.IntN(8) == 0 {
			rnd.Mutate(spec, 1)
		}
		obj := map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Box", "spec": spec}
		valid := lib.Validate(obj).IsValid()
		switch {
		case fast.valid(obj) && !valid:
			t.Fatalf("spec %v: the fast check accepts what the library rejects: %v", spec, lib.Validate(obj).Errors)
		case fast.valid(obj):
			accepted++
		case valid:
			unsure++
		default:
			invalid++
		}
	}
	t.Logf("accepted %d, valid but left to the library %d, invalid %d", accepted, unsure, invalid)
	if accepted < sweep/10 || invalid < sweep/10 || unsure == 0 {
		t.Errorf("accepted %d, valid but left to the library %d, invalid %d of %d; want each, the first and last in a tenth", accepted, unsure, invalid, sweep)
	}
}

// Keywords a structural schema cannot have, against the library's
// validator on hand-made schemas.
func TestFastSchemaKeywords(t *testing.T) {
	str := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}}
	num := func(ty string, enum ...any) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{ty}, Enum: enum}}
	}
	object := func(p spec.SchemaProps) *spec.Schema {
		p.Type = spec.StringOrArray{"object"}
		p.Properties = map[string]spec.Schema{"a": str}
		return &spec.Schema{SchemaProps: p}
	}
	formatted := func(ty, format string) *spec.Schema {
		return &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{ty}, Format: format}}
	}
	for _, tc := range []struct {
		name   string
		schema *spec.Schema
		value  any
		fast   bool
	}{
		{"closed, known key", object(spec.SchemaProps{AdditionalProperties: &spec.SchemaOrBool{Allows: false}}), map[string]any{"a": "x"}, true},
		{"closed, other key", object(spec.SchemaProps{AdditionalProperties: &spec.SchemaOrBool{Allows: false}}), map[string]any{"b": "x"}, false},
		{"closed with a schema", object(spec.SchemaProps{AdditionalProperties: &spec.SchemaOrBool{Allows: false, Schema: &str}}), map[string]any{"b": "x"}, false},
		{"open", object(spec.SchemaProps{AdditionalProperties: &spec.SchemaOrBool{Allows: true}}), map[string]any{"b": int64(1)}, true},
		{"integer enum", &spec.Schema{SchemaProps: num("integer", int64(1), int64(2)).SchemaProps}, int64(2), true},
		{"integer outside the enum", &spec.Schema{SchemaProps: num("integer", int64(1)).SchemaProps}, int64(2), false},
		{"float enum, integer value", &spec.Schema{SchemaProps: num("number", 2.0).SchemaProps}, int64(2), false},
		{"integer as number", &spec.Schema{SchemaProps: num("number").SchemaProps}, int64(2), true},
		{"float as integer", &spec.Schema{SchemaProps: num("integer").SchemaProps}, 2.0, false},
		{"two types", &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string", "null"}}}, "s", false},
		{"tuple items", &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"array"}, Items: &spec.SchemaOrArray{Schemas: []spec.Schema{str}}}}, []any{"a"}, false},
		{"no type", &spec.Schema{}, "s", true},
		{"null", &spec.Schema{}, nil, false},
		{"bad pattern", &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}, Pattern: "("}}, "s", false},
		{"date-time", formatted("string", "date-time"), "2026-11-21T07:00:00Z", true},
		{"not a date-time", formatted("string", "date-time"), "yesterday", false},
		{"datetime", formatted("string", "datetime"), "2026-11-21T07:00:00Z", true},
		{"date", formatted("string", "date"), "2026-11-21", true},
		{"not a date", formatted("string", "date"), "2026-11-31", false},
		{"duration", formatted("string", "duration"), "3h", true},
		{"hostname", formatted("string", "hostname"), "example.com", true},
		{"email", formatted("string", "email"), "a@example.com", true},
		{"not an email", formatted("string", "email"), "a", false},
		{"uuid", formatted("string", "uuid"), "0b6f3c9e-5d6c-4f0a-9a53-0e6f0f4d1a11", true},
		{"not a uuid", formatted("string", "uuid"), "0b6f3c9e", false},
		{"password", formatted("string", "password"), "", true},
		{"a format left to the library", formatted("string", "ipv4"), "10.0.0.1", false},
		{"an unknown format", formatted("string", "colour"), "red", false},
		{"a date-time that is not a string", formatted("string", "date-time"), int64(1), false},
		{"a format on an object", &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Format: "date-time"}}, map[string]any{}, false},
		{"int64", formatted("integer", "int64"), int64(math.MaxInt64), true},
		{"int32", formatted("integer", "int32"), int64(math.MaxInt32), true},
		{"int32 out of range", formatted("integer", "int32"), int64(math.MaxInt32) + 1, false},
		{"int32 below range", formatted("integer", "int32"), int64(math.MinInt32) - 1, false},
		{"int64 as a float", formatted("integer", "int64"), 1.0, false},
		{"a number's format", formatted("number", "double"), 1.5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compileFast(tc.schema).valid(tc.value)
			if got != tc.fast {
				t.Errorf("fast check %v, want %v", got, tc.fast)
			}
			if lib := validate.NewSchemaValidator(tc.schema, nil, "", strfmt.Default).Validate(tc.value); got && !lib.IsValid() {
				t.Errorf("accepted, but the library says %v", lib.Errors)
			}
		})
	}
}

// compileFast looks at every keyword of spec.SchemaProps that the
// library's validator reads: a keyword added to the library must be
// decided or left to the library here before this test passes again.
func TestFastSchemaKnowsEveryKeyword(t *testing.T) {
	known := []string{
		// Not read by the validator.
		"ID", "Schema", "Description", "Title", "Default", "Definitions",
		// Decided by the fast check.
		"Type", "Enum", "MaxLength", "MinLength", "Pattern", "Required", "Items", "Properties", "AdditionalProperties",
		"Format", // some of them
		// Left to the library.
		"Ref", "Nullable", "Maximum", "ExclusiveMaximum", "Minimum", "ExclusiveMinimum", "MaxItems", "MinItems",
		"UniqueItems", "MultipleOf", "MaxProperties", "MinProperties", "AllOf", "OneOf", "AnyOf", "Not",
		"PatternProperties", "Dependencies", "AdditionalItems",
	}
	typ := reflect.TypeFor[spec.SchemaProps]()
	for i := range typ.NumField() {
		if f := typ.Field(i).Name; !slices.Contains(known, f) {
			t.Errorf("spec.SchemaProps.%s: a keyword the fast check does not know", f)
		}
	}
}

// FuzzFastSchema checks on any spec that the fast check accepts only what
// the library's validator accepts.
func FuzzFastSchema(f *testing.F) {
	fast, lib := fastBoxes(f)
	for _, seed := range []string{
		`{"name":"ab"}`,
		`{"name":"éé","size":"large","count":3,"ratio":0.5,"on":true,"tags":["a"],"labels":{"a":"x"},"nested":{"deep":"v"}}`,
		`{"name":"abcde"}`,
		`{"name":"ab","labels":{"a":"y"}}`,
		`{"name":"ab","maybe":null,"port":"http","free":{"x":[1,{"y":null}]}}`,
		`{"name":"ab","count":1.5,"ratio":"1","tags":[1]}`,
		`{"name":"ab","when":"2026-11-21T07:00:00Z","id":"0b6f3c9e-5d6c-4f0a-9a53-0e6f0f4d1a11","big":1099511627776,"small":-2147483648}`,
		`{"name":"ab","when":"2026-11-21","small":2147483648,"addr":"10.0.0.1"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		// Decoded as the API decodes a request body.
		u, ok := objjson.Decode([]byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","spec":` + spec + `}`))
		if !ok {
			return
		}
		if fast.valid(u) {
			if res := lib.Validate(u); !res.IsValid() {
				t.Fatalf("spec %s: the fast check accepts what the library rejects: %v", spec, res.Errors)
			}
		}
	})
}
