package kinds

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	kjson "sigs.k8s.io/json"
)

// A built-in kind's object is decoded by kube-apiserver into its Go type,
// which drops the fields the type does not declare, at any depth, and
// reports each by its path (rules[0].verb, spec.versions[0].schema.
// openAPIV3Schema.properties.size.typo) to fieldValidation. Setpoint finds
// them as kube-apiserver does: it decodes the object's JSON into the same
// Go type with the same strict decoder (sigs.k8s.io/json), which reports
// the same paths; a type's own UnmarshalJSON (quantities, times, a CRD
// schema's items) is its own business in both. It needs no schema to be
// parsed, so writing the default objects at start-up costs nothing more.

// typedFields is what the unknown fields of a built-in kind's objects are
// found with: its Go type, and its top-level fields that cannot hold an
// object (a ConfigMap's data, a Secret's type), which are left out of the
// decoding since nothing below them can be unknown (and a Secret's data
// would be base64-decoded for nothing).
type typedFields struct {
	typ      reflect.Type
	noFields map[string]bool
	// schema types the kind's objects by its API's structured-merge-diff
	// schema (builtintypes.go), made once that schema is parsed.
	schemaOnce sync.Once
	schema     *builtinTypes
}

// parsedSchema returns the typing of sv's objects by its API's schema when
// that schema has been parsed (by the field managers, on the first
// server-side apply to a built-in kind's object), nil before: writes never
// wait for it to be parsed.
func (tf *typedFields) parsedSchema(sv *Kind) *builtinTypes {
	if !typesParsed(sv) {
		return nil
	}
	tf.schemaOnce.Do(func() {
		if bt, ok := newBuiltinTypes(sv); ok {
			tf.schema = &bt
		}
	})
	return tf.schema
}

// newTypedFields returns the typing of objects of the struct type of
// typed, a pointer to it; nil when typed is nil.
func newTypedFields(typed any) *typedFields {
	if typed == nil {
		return nil
	}
	t := reflect.TypeOf(typed).Elem()
	tf := &typedFields{typ: t, noFields: map[string]bool{}}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" || name == "-" {
			continue
		}
		if !holdsObjects(f.Type) {
			tf.noFields[name] = true
		}
	}
	return tf
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// holdsObjects reports whether a value of type t may hold a struct the
// decoder fills field by field: one that does not decode itself.
func holdsObjects(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		return !reflect.PointerTo(t).Implements(jsonUnmarshaler)
	case reflect.Slice:
		return t.Elem().Kind() != reflect.Uint8 && holdsObjects(t.Elem())
	case reflect.Pointer, reflect.Array, reflect.Map:
		return holdsObjects(t.Elem())
	case reflect.Interface:
		return true
	}
	return false
}

// prune deletes from obj the fields its Go type does not declare, below
// metadata (which objectMeta coerces) at any depth, and returns their
// paths as kube-apiserver's strict decoder spells them, sorted. ok is false
// when obj does not decode into the type (a string for a list, say): then
// nothing was pruned, and validation answers for the object. With schema,
// the kind's parsed structured-merge-diff typing, an object it finds no
// unknown field in (all but a few) is not decoded: the walk costs a tenth
// of the decoding and allocates nothing.
func (tf *typedFields) prune(obj map[string]any, schema *builtinTypes) (unknown []string, ok bool) {
	if schema != nil && !schema.hasUnknown(obj, tf.noFields) {
		return nil, true
	}
	in := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "metadata" && !tf.noFields[k] {
			in[k] = v
		}
	}
	data, err := json.Marshal(in)
	if err != nil {
		return nil, false
	}
	strict, err := kjson.UnmarshalStrict(data, reflect.New(tf.typ).Interface(), kjson.DisallowUnknownFields)
	if err != nil {
		return nil, false
	}
	for _, e := range strict {
		var fe kjson.FieldError
		if errors.As(e, &fe) && deletePath(obj, fe.FieldPath()) {
			unknown = append(unknown, fe.FieldPath())
		}
	}
	slices.Sort(unknown)
	return unknown, true
}

// deletePath deletes the member at path, spelled as the strict decoder
// spells it (keys joined by ".", list indexes as "[i]"), from v, and reports
// whether it was there. A key may hold a dot itself (a CRD schema's
// property "a.b"), so each prefix of path that ends before a "." or "["
// is tried as a key, shortest first.
func deletePath(v any, path string) bool {
	switch v := v.(type) {
	case map[string]any:
		for i := 0; i < len(path); i++ {
			if c := path[i]; c != '.' && c != '[' {
				continue
			}
			e, ok := v[path[:i]]
			if !ok {
				continue
			}
			rest := path[i:]
			if rest[0] == '.' {
				rest = rest[1:]
			}
			if deletePath(e, rest) {
				return true
			}
		}
		if _, ok := v[path]; ok {
			delete(v, path)
			return true
		}
	case []any:
		j := strings.IndexByte(path, ']')
		if len(path) == 0 || path[0] != '[' || j < 0 {
			return false
		}
		i, err := strconv.Atoi(path[1:j])
		if err != nil || i < 0 || i >= len(v) {
			return false
		}
		rest := path[j+1:]
		if rest == "" {
			return false
		}
		if rest[0] == '.' {
			rest = rest[1:]
		}
		return deletePath(v[i], rest)
	}
	return false
}
