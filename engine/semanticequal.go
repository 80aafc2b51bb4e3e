package engine

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
)

// semanticEqual returns equality.Semantic.DeepEqual(a, b) for the values of
// Unstructured objects, without reflection while it meets only the types
// JSON decoding gives (map[string]any, []any, string, int64, float64, bool
// and nil); on any other type it asks equality.Semantic about the whole.
func semanticEqual(a, b map[string]any) bool {
	if eq, ok := semanticJSONEqual(a, b); ok {
		return eq
	}
	return equality.Semantic.DeepEqual(a, b)
}

// semanticJSONEqual compares as equality.Semantic.DeepEqual does: empty and
// nil maps and slices are equal, values of different types are not, NaN
// differs from itself except inside one same map or slice (DeepEqual
// compares a map or slice with itself by address). ok is false when it met
// a type it does not handle; eq is then meaningless.
func semanticJSONEqual(a, b any) (eq, ok bool) {
	switch x := a.(type) {
	case map[string]any:
		y, isMap := b.(map[string]any)
		if !isMap {
			return false, isJSONType(b)
		}
		if len(x) == 0 || len(y) == 0 {
			return len(x) == len(y), true
		}
		if len(x) != len(y) {
			return false, true
		}
		if reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() {
			return true, true
		}
		for k, xv := range x {
			yv, found := y[k]
			if !found {
				return false, true
			}
			if eq, ok := semanticJSONEqual(xv, yv); !ok || !eq {
				return eq, ok
			}
		}
		return true, true
	case []any:
		y, isSlice := b.([]any)
		if !isSlice {
			return false, isJSONType(b)
		}
		if len(x) == 0 || len(y) == 0 {
			return len(x) == len(y), true
		}
		if len(x) != len(y) {
			return false, true
		}
		if &x[0] == &y[0] {
			return true, true
		}
		for i := range x {
			if eq, ok := semanticJSONEqual(x[i], y[i]); !ok || !eq {
				return eq, ok
			}
		}
		return true, true
	case string:
		y, same := b.(string)
		return same && x == y, same || isJSONType(b)
	case int64:
		y, same := b.(int64)
		return same && x == y, same || isJSONType(b)
	case float64:
		y, same := b.(float64)
		return same && x == y, same || isJSONType(b)
	case bool:
		y, same := b.(bool)
		return same && x == y, same || isJSONType(b)
	case nil:
		return b == nil, isJSONType(b)
	}
	return false, false
}

// isJSONType tells whether v is of a type JSON decoding gives.
func isJSONType(v any) bool {
	switch v.(type) {
	case map[string]any, []any, string, int64, float64, bool, nil:
		return true
	}
	return false
}
