package kinds

import (
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

// Parsing a schema takes a while (some 100 ms for client-go's, which holds
// every built-in API type), so each is parsed on first use, which says so
// in its parsed flag.
var (
	coreTypeConverter = sync.OnceValue(func() managedfields.TypeConverter {
		defer coreParsed.Store(true)
		return applyconfigurations.NewTypeConverter(builtinScheme())
	})
	apiextensionsTypeConverter = sync.OnceValue(func() managedfields.TypeConverter {
		defer apiextensionsParsed.Store(true)
		return extapply.NewTypeConverter(builtinScheme())
	})
	coreParsed, apiextensionsParsed atomic.Bool
)

// typesParsed reports whether the schema sv's objects are typed with has
// been parsed, so that newBuiltinTypes returns at once.
func typesParsed(sv *Kind) bool {
	if sv.GVR.Group == apiextensionsv1.GroupName {
		return apiextensionsParsed.Load()
	}
	return coreParsed.Load()
}

// builtinTypes is the typing of a built-in kind's objects: its type
// converter, and the schema and type it gives the kind's objects.
type builtinTypes struct {
	tc     managedfields.TypeConverter
	schema *smdschema.Schema
	root   smdschema.TypeRef
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
	return builtinTypes{tc: tc, schema: tv.Schema(), root: tv.TypeRef()}, true
}

// declaredOnly returns obj without the fields its kind's schema does not
// declare, at any depth: obj itself when it has none, else a copy. Writes
// prune a built-in object's unknown fields at any depth (unknownfields.go),
// but one stored before they did may hold some below the top level (a
// Role's rule with a field PolicyRule lacks), which the type converter
// refuses, as kube-apiserver's decoder would have dropped them.
func (b builtinTypes) declaredOnly(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if !b.prune(obj.Object, b.root, false) {
		return obj
	}
	out := obj.DeepCopy()
	b.prune(out.Object, b.root, true)
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
		if !ok || b.prune(v, f.Type, false) {
			return true
		}
	}
	return false
}

// prune reports whether v holds a field the type tr does not declare, and
// deletes those fields when drop is set. Without drop it also reports a
// value of another shape than its type's (a map for a list, a number for a
// string), which the decoder refuses. It walks v as structured-merge-
// diff's validation does: a map's keys are its type's fields, or else its
// elements when it has an element type; a list's items are of its element
// type.
func (b builtinTypes) prune(v any, tr smdschema.TypeRef, drop bool) bool {
	a, ok := b.schema.Resolve(tr)
	if !ok {
		return false
	}
	if !drop && mistyped(v, a) {
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
			case ok:
				found = b.prune(e, f.Type, drop) || found
			case a.Map.ElementType != (smdschema.TypeRef{}):
				found = b.prune(e, a.Map.ElementType, drop) || found
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
			if b.prune(e, a.List.ElementType, drop) {
				if !drop {
					return true
				}
				found = true
			}
		}
	}
	return found
}

// mistyped reports whether the JSON value v is not of the shape of the
// atom a: a map where a has no map, a list where it has no list, a scalar
// of another type. Null is of any type.
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
		switch v.(type) {
		case int64, float64:
			return false
		}
		return true
	}
	return false
}
