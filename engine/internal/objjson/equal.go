package objjson

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
)

// Three rules of equality over decoded JSON, each for its own question:
//
//   - DeepEqual: is it the same Go value (reflect.DeepEqual's rule)? Asked
//     where a change of representation counts as a change, as when the
//     engine checks whether admission touched an object it already coerced.
//   - SemanticEqual: would Kubernetes see a change (equality.Semantic's
//     rule)? Asked where the engine decides whether a write is a no-op.
//   - ValueEqual: is it the same JSON document? Asked by the controller,
//     which compares what it wants with what a decoder gave, whichever Go
//     types the two hold numbers in.
//
// Subset is the controller's question of whether an object already holds
// every field it wants set.
//
//	                              DeepEqual  SemanticEqual  ValueEqual
//	int64(1) and float64(1)       no         no             yes
//	int(1) and int64(1)           no         no             yes
//	nil map and empty map         no         yes            yes
//	{"a": null} and {}            no         no             yes
//	NaN and NaN                   no         no             no

// DeepEqual reports whether a and b are equal by reflect.DeepEqual's rule,
// without reflection for the types JSON decoding gives (map[string]any,
// []any, string, int64, float64, bool and nil): values of different Go
// types differ (an int64 and a float64 of one value), a nil map or slice
// differs from an empty one, a null map entry differs from a missing one,
// and NaN differs from itself. Any other type is compared by
// reflect.DeepEqual itself.
func DeepEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || x == nil || y == nil || len(x) != len(y) {
			return ok && x == nil && y == nil
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !DeepEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || x == nil || y == nil || len(x) != len(y) {
			return ok && x == nil && y == nil
		}
		for i := range x {
			if !DeepEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return reflect.DeepEqual(a, b)
}

// SemanticEqual reports whether a and b are equal by
// equality.Semantic.DeepEqual's rule, without reflection while it meets
// only the types JSON decoding gives: a nil map or slice equals an empty
// one, values of different Go types differ (an int64 and a float64 of one
// value), a null map entry differs from a missing one, and NaN differs from
// itself except inside one same map or slice (DeepEqual compares a map or
// slice with itself by address). On any other type (a resource.Quantity,
// say) it asks equality.Semantic about the whole.
func SemanticEqual(a, b map[string]any) bool {
	if eq, ok := semanticJSONEqual(a, b); ok {
		return eq
	}
	return equality.Semantic.DeepEqual(a, b)
}

// semanticJSONEqual is SemanticEqual over the types JSON decoding gives. ok
// is false when it met a type it does not handle; eq is then meaningless.
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

// ValueEqual reports whether a and b are the same JSON document, whatever
// Go types hold them: numbers compare by value (NumberEqual), a null map
// entry equals a missing one, a nil map or slice equals an empty one, a
// null differs from an empty map or list, and NaN differs from itself.
// Other scalars compare with ==.
func ValueEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range x {
			if !ValueEqual(v, y[k]) {
				return false
			}
		}
		for k, v := range y {
			if _, ok := x[k]; !ok && v != nil {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !ValueEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return scalarEqual(a, b)
}

// Subset reports whether every field that want sets has the same value in
// cur, by ValueEqual's rule: maps may hold more keys in cur, lists must
// have the same length and match element by element, a null in want
// matches a missing field, and an empty map or list in want matches a
// missing one in cur.
func Subset(want, cur any) bool {
	switch w := want.(type) {
	case nil:
		return cur == nil
	case map[string]any:
		c, ok := cur.(map[string]any)
		if !ok {
			return len(w) == 0 && cur == nil
		}
		for k, v := range w {
			if !Subset(v, c[k]) {
				return false
			}
		}
		return true
	case []any:
		c, ok := cur.([]any)
		if !ok {
			return len(w) == 0 && cur == nil
		}
		if len(w) != len(c) {
			return false
		}
		for i := range w {
			if !Subset(w[i], c[i]) {
				return false
			}
		}
		return true
	}
	return scalarEqual(want, cur)
}

// scalarEqual compares two JSON scalars: numbers by NumberEqual, anything
// else with ==.
func scalarEqual(a, b any) bool {
	if eq, ok := NumberEqual(a, b); ok {
		return eq
	}
	return a == b
}
