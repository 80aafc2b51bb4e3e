package kinds

import (
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	extapply "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// The type converters of the built-in kinds type their objects with the
// structured-merge-diff schemas of their Kubernetes API types: those
// client-go (core and RBAC types) and apiextensions-apiserver (CRDs)
// generate from the OpenAPI definitions kube-apiserver builds its own type
// converter from. With them, server-side apply records the same
// managedFields as kube-apiserver: the members of a map (labels, a
// ConfigMap's data) without the map itself, a list merged by its keys
// (a ServiceAccount's secrets by name), an atomic list whole. A deduced
// type, which cannot tell a map field from a struct, would own the map
// too (`.: {}`) and leave it to the manager that lost its last member.

// builtinScheme names the Go types of the built-in kinds, which is how
// the converters find a kind's schema (runtime.Scheme's
// ToOpenAPIDefinitionName).
var builtinScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, rbacv1.AddToScheme, eventsv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // registering the API's own types cannot fail
		}
	}
	return s
})

// Parsing a schema takes a while (some 100-150 ms of CPU for client-go's,
// which holds every built-in API type; about 1 MiB of heap once parsed, and
// some 15 MiB more RSS after), so each is parsed once, on first use:
// client-go's on the first write from a request of a built-in object with
// typed fields, apiextensions-apiserver's on the first CRD written from a
// request. The server's own writes at start (default RBAC roles, system
// CRDs) are built in their kinds' stored shape (WithBuiltShape) and parse
// neither.
var (
	coreTypeConverter = sync.OnceValue(func() managedfields.TypeConverter {
		schemaParses.Add(1)
		return applyconfigurations.NewTypeConverter(builtinScheme())
	})
	apiextensionsTypeConverter = sync.OnceValue(func() managedfields.TypeConverter {
		schemaParses.Add(1)
		return extapply.NewTypeConverter(builtinScheme())
	})
	schemaParses atomic.Int32
)

// SchemaParses reports how many of the built-in APIs' schemas (client-go's,
// apiextensions-apiserver's) this process has parsed: at most two. Tests
// use it to keep the server's own writes from parsing them.
func SchemaParses() int { return int(schemaParses.Load()) }

// builtinTypes is the typing of a built-in kind's objects: its type
// converter, and the schema and type it gives the kind's objects.
type builtinTypes struct {
	tc     managedfields.TypeConverter
	schema *smdschema.Schema
	root   smdschema.TypeRef
	// base64Fields are the names of the fields below the top level whose
	// Go type is []byte (a CRD webhook's caBundle): the schema types them
	// as strings, but only base64 decodes.
	base64Fields map[string]bool
}

// newBuiltinTypes returns the typing of sv's objects; ok is false when the
// API has no schema for its kind.
func newBuiltinTypes(sv *Kind) (builtinTypes, bool) {
	tc := coreTypeConverter()
	if sv.GVR.Group == apiextensionsv1.GroupName {
		tc = apiextensionsTypeConverter()
	}
	tv, err := tc.ObjectToTyped(sv.EmptyObject())
	if err != nil {
		return builtinTypes{}, false
	}
	bt := builtinTypes{tc: tc, schema: tv.Schema(), root: tv.TypeRef(), base64Fields: map[string]bool{}}
	if sv.typed != nil {
		for i := range sv.typed.typ.NumField() {
			bytesFields(sv.typed.typ.Field(i).Type, bt.base64Fields, map[reflect.Type]bool{})
		}
	}
	return bt, true
}

// bytesFields adds to names the JSON names of the []byte fields of the
// structs t holds, at any depth.
func bytesFields(t reflect.Type, names map[string]bool, seen map[reflect.Type]bool) {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		bytesFields(t.Elem(), names, seen)
	case reflect.Struct:
		if seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" &&
				f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Uint8 {
				names[name] = true
				continue
			}
			bytesFields(f.Type, names, seen)
		}
	}
}

// acceptsAnyJSON names the types the schema leaves untyped whose Go
// types take any JSON value (apiextensions' JSON, a CRD schema's default
// or example; the schema's own free-form types). The others (a time, a
// quantity, an int-or-string, a CRD schema's items) decode themselves and
// may refuse a value: the decoder is asked.
func acceptsAnyJSON(tr smdschema.TypeRef) bool {
	if tr.NamedType == nil {
		return false
	}
	switch n := *tr.NamedType; n {
	case "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
		"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1beta1.JSON":
		return true
	default:
		return strings.HasPrefix(n, "__untyped_")
	}
}

// declaredOnly returns obj without the fields its kind's schema does not
// declare, at any depth: obj itself when it has none, else a copy. Writes
// prune a built-in object's unknown fields at any depth (unknownfields.go),
// but one stored before they did may hold some below the top level (a
// Role's rule with a field PolicyRule lacks), which the type converter
// refuses, as kube-apiserver's decoder would have dropped them.
func (b builtinTypes) declaredOnly(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if !b.prune(obj.Object, b.root, findUnknown) {
		return obj
	}
	out := obj.DeepCopy()
	b.prune(out.Object, b.root, dropUnknown)
	return out
}

// hasUnknown reports whether obj, an object of the kind, holds a field its
// type does not declare outside metadata and the top-level fields in skip.
func (b builtinTypes) hasUnknown(obj map[string]any, skip map[string]bool) bool {
	a, ok := b.schema.Resolve(b.root)
	if !ok || a.Map == nil {
		return true // untyped: let the decoder tell
	}
	for k, v := range obj {
		if k == "metadata" || skip[k] {
			continue
		}
		f, ok := a.Map.FindField(k)
		if !ok || b.prune(v, f.Type, findUndecidable) {
			return true
		}
	}
	return false
}

// pruneMode is what prune looks for in a value, or does to it.
type pruneMode int

const (
	// findUnknown finds a field the type does not declare.
	findUnknown pruneMode = iota
	// findUndecidable finds, as well, a value the decoder refuses or may
	// refuse: one of another shape than its type's (a map for a list, a
	// number for a string), one the schema leaves untyped whose Go type
	// decodes itself (a time), a []byte field's string that is not plain
	// base64.
	findUndecidable
	// dropUnknown deletes the fields the type does not declare.
	dropUnknown
)

// prune reports whether v holds what mode looks for in a value of type
// tr, and deletes the undeclared fields when mode is dropUnknown. It
// walks v as structured-merge-diff's validation does: a map's keys are its
// type's fields, or else its elements when it has an element type; a
// list's items are of its element type.
func (b builtinTypes) prune(v any, tr smdschema.TypeRef, mode pruneMode) bool {
	drop := mode == dropUnknown
	a, ok := b.schema.Resolve(tr)
	if !ok {
		return false
	}
	if mode == findUndecidable && (mistyped(v, a) || v != nil && a.Scalar != nil && *a.Scalar == smdschema.Untyped && !acceptsAnyJSON(tr)) {
		return true // let the decoder tell
	}
	found := false
	switch v := v.(type) {
	case map[string]any:
		if a.Map == nil {
			return false
		}
		for k, e := range v {
			switch f, ok := a.Map.FindField(k); {
			case ok && mode == findUndecidable && b.base64Fields[k] && !base64Value(e):
				return true // let the decoder tell
			case ok:
				found = b.prune(e, f.Type, mode) || found
			case a.Map.ElementType != (smdschema.TypeRef{}):
				found = b.prune(e, a.Map.ElementType, mode) || found
			default:
				if !drop {
					return true
				}
				delete(v, k)
				found = true
			}
			if found && !drop {
				return true
			}
		}
	case []any:
		if a.List == nil {
			return false
		}
		for _, e := range v {
			if b.prune(e, a.List.ElementType, mode) {
				if !drop {
					return true
				}
				found = true
			}
		}
	}
	return found
}

// base64Value reports whether v, the value of a []byte field, decodes
// as plain base64 (or is null, or not a string, which mistyped tells).
func base64Value(v any) bool {
	s, ok := v.(string)
	return !ok || plainBase64(s)
}

// mistyped reports whether the JSON value v is not of the shape of the
// atom a, or may not be: a map where a has no map, a list where it has no
// list, a scalar of another type, a number outside int32's integers. Null
// is of any type.
func mistyped(v any, a smdschema.Atom) bool {
	switch v.(type) {
	case nil:
		return false
	case map[string]any:
		return a.Map == nil
	case []any:
		return a.List == nil
	}
	if a.Scalar == nil {
		return true
	}
	switch *a.Scalar {
	case smdschema.String:
		_, ok := v.(string)
		return !ok
	case smdschema.Boolean:
		_, ok := v.(bool)
		return !ok
	case smdschema.Numeric:
		// The schema does not tell an int32 from an int64 or a float64:
		// only an integer every one of them holds is known to decode; a
		// fraction or a larger integer is left to the decoder, which
		// refuses it for an int32 (an Event series' count).
		n, ok := v.(int64)
		return !ok || n < math.MinInt32 || n > math.MaxInt32
	}
	return false
}
