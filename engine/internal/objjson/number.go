package objjson

import (
	"encoding/json"
	"math"
)

// NormalizeNumbers converts, in place in maps and slices, the numbers of a
// JSON value to the types the API's JSON decoder gives: an integral float64
// within ±2^53 (where every integer is exact) becomes an int64, as do int
// and int32; a float32 is treated as the float64 of its value. Other
// numbers (fractional, larger, NaN, infinities) and non-numbers are kept.
// It returns the converted value, for a scalar or the caller's copy of a
// root. An object built by a caller with encoding/json then validates like
// one decoded from a request.
func NormalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = NormalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = NormalizeNumbers(e)
		}
	case float64:
		if x == float64(int64(x)) && x >= -(1<<53) && x <= 1<<53 {
			return int64(x)
		}
	case float32:
		return NormalizeNumbers(float64(x))
	case int:
		return int64(x)
	case int32:
		return int64(x)
	}
	return v
}

// NumberEqual compares a and b as JSON numbers, whatever their Go types
// (int, int32, int64, float32, float64, json.Number). ok is false unless a
// is a number other than NaN; then eq is false when b is not a number. Two
// integers compare exactly, and an integer equals a float only when the
// float is integral and has exactly the integer's value: a float64 holds no
// integer above 2^53 exactly, so converting one to the other would make
// neighbours equal.
func NumberEqual(a, b any) (eq, ok bool) {
	na, ok := number(a)
	if !ok {
		return false, false
	}
	nb, ok := number(b)
	switch {
	case !ok:
		return false, true
	case na.isInt && nb.isInt:
		return na.i == nb.i, true
	case na.isInt:
		return floatIs(nb.f, na.i), true
	case nb.isInt:
		return floatIs(na.f, nb.i), true
	}
	return na.f == nb.f, true
}

// Integer returns a JSON number that holds an integer as an int64: an
// integer of any Go type, or an integral float in int64's range.
func Integer(v any) (int64, bool) {
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

// num is a JSON number: an integer (i) or a float (f).
type num struct {
	i     int64
	f     float64
	isInt bool
}

// number returns a JSON number of any Go representation; NaN is none.
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

// floatIs reports whether f is exactly the integer i.
func floatIs(f float64, i int64) bool {
	n, ok := Integer(f)
	return ok && n == i
}
