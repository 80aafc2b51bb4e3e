package controller

import (
	"encoding/json"
	"math"
)

// subset reports whether every field that want sets has the same value in
// cur: maps may hold more keys in cur, lists must have the same length and
// match element by element. A null in want matches a missing field. Numbers
// compare by value, whatever their Go type.
func subset(want, cur any) bool {
	switch w := want.(type) {
	case nil:
		return cur == nil
	case map[string]any:
		c, ok := cur.(map[string]any)
		if !ok {
			return len(w) == 0 && cur == nil
		}
		for k, v := range w {
			if !subset(v, c[k]) {
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
			if !subset(w[i], c[i]) {
				return false
			}
		}
		return true
	}
	return scalarEqual(want, cur)
}

// jsonEqual reports whether a and b are the same JSON value; numbers compare
// by value, a null map entry equals a missing one.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range x {
			if !jsonEqual(v, y[k]) {
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
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return scalarEqual(a, b)
}

func scalarEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return a == b
}

// number returns a JSON number of any Go representation as a float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n)
	case float32:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// deepCopyJSON copies a JSON value of maps, lists and scalars.
func deepCopyJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopyJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopyJSON(e)
		}
		return out
	}
	return v
}
