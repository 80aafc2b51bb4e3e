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

// scalarEqual reports whether two JSON scalars are equal. Numbers compare by
// value whatever their Go type: two integers exactly (a float64 holds no
// integer above 2^53 exactly, so converting would make neighbours equal), an
// integer and a float only when the float is integral and has exactly the
// integer's value.
func scalarEqual(a, b any) bool {
	na, ok := number(a)
	if !ok {
		return a == b
	}
	nb, ok := number(b)
	switch {
	case !ok:
		return false
	case na.isInt && nb.isInt:
		return na.i == nb.i
	case na.isInt:
		return floatIs(nb.f, na.i)
	case nb.isInt:
		return floatIs(na.f, nb.i)
	}
	return na.f == nb.f
}

// num is a JSON number: an integer (i) or a float (f).
type num struct {
	i     int64
	f     float64
	isInt bool
}

// number returns a JSON number of any Go representation.
func number(v any) (num, bool) {
	switch n := v.(type) {
	case int64:
		return num{i: n, isInt: true}, true
	case int:
		return num{i: int64(n), isInt: true}, true
	case int32:
		return num{i: int64(n), isInt: true}, true
	case float64:
		return num{f: n}, !math.IsNaN(n)
	case float32:
		return num{f: float64(n)}, !math.IsNaN(float64(n))
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return num{i: i, isInt: true}, true
		}
		f, err := n.Float64()
		return num{f: f}, err == nil && !math.IsNaN(f)
	}
	return num{}, false
}

// integer returns a JSON number that holds an integer as an int64: an
// integer, or an integral float in range.
func integer(v any) (int64, bool) {
	n, ok := number(v)
	switch {
	case !ok:
		return 0, false
	case n.isInt:
		return n.i, true
	case n.f == math.Trunc(n.f) && n.f >= -(1<<63) && n.f < 1<<63:
		return int64(n.f), true
	}
	return 0, false
}

// floatIs reports whether f is exactly the integer i.
func floatIs(f float64, i int64) bool {
	n, ok := integer(f)
	return ok && n == i
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
