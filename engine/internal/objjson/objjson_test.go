package objjson

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// checkAppend fails when Append encodes v and gives other than
// json.Marshal, or encodes what json.Marshal refuses. It reports whether
// Append encoded v.
func checkAppend(t *testing.T, v any) bool {
	t.Helper()
	got, ok := Append([]byte("prefix"), v)
	want, err := json.Marshal(v)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("Append encoded %#v, which json.Marshal refuses: %v", v, err)
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("Append(%#v)\n = %s\njson.Marshal\n = prefix%s", v, got, want)
	}
	return true
}

// TestAppendIsMarshal: Append writes what json.Marshal writes, and leaves
// to it what it does not handle.
func TestAppendIsMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		ok   bool
	}{
		{"empty", map[string]any{}, true},
		{"scalars", map[string]any{"s": "x", "i": int64(-3), "t": true, "f": false, "n": nil, "fl": 1.5, "big": 1e21, "small": 1e-7, "neg0": math.Copysign(0, -1), "max": int64(math.MaxInt64), "min": int64(math.MinInt64)}, true},
		{"escapes", map[string]any{"a<b>&": "\"\\\n\t\b\f\r\x01\x7f<>&é\u2028\u2029\xff", "k": "plain"}, true},
		{"nested", map[string]any{"z": []any{map[string]any{"b": int64(1), "a": []any{}}, nil, "x"}, "a": map[string]any(nil), "l": []any(nil)}, true},
		{"a list", []any{"x", int64(1)}, true},
		{"a string", "é", true},
		{"NaN", map[string]any{"f": math.NaN()}, false},
		{"infinity", []any{math.Inf(-1)}, false},
		{"int", map[string]any{"i": 1}, false},
		{"float32", map[string]any{"f": float32(1)}, false},
		{"typed map", map[string]any{"m": map[string]string{"a": "b"}}, false},
		{"json.Number", map[string]any{"n": json.Number("1")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkAppend(t, tc.v); got != tc.ok {
				t.Errorf("Append handled %#v: %v, want %v", tc.v, got, tc.ok)
			}
		})
	}
}

// TestAppendRandom compares Append with json.Marshal on random values of
// the types JSON decoding gives, with numbers across float64's range and
// strings with every class of byte encoding/json escapes.
func TestAppendRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 5000 {
		v := randomAppendValue(r, 0)
		if !checkAppend(t, v) {
			t.Fatalf("Append refused %#v", v)
		}
	}
}

func randomAppendValue(r *rand.Rand, depth int) any {
	n := 8
	if depth > 3 {
		n = 6
	}
	switch r.IntN(n) {
	case 0:
		return randomAppendString(r)
	case 1:
		return []int64{0, -1, r.Int64(), -r.Int64(), math.MaxInt64, math.MinInt64}[r.IntN(6)]
	case 2:
		return []float64{0, math.Copysign(0, -1), r.NormFloat64(), r.NormFloat64() * 1e22, r.NormFloat64() * 1e-8,
			math.MaxFloat64, math.SmallestNonzeroFloat64, 1e21, 1e20, 1e-6, 1e-7, float64(r.Int64())}[r.IntN(12)]
	case 3:
		return []any{true, false, nil}[r.IntN(3)]
	case 4:
		return []any{map[string]any(nil), []any(nil), map[string]any{}, []any{}}[r.IntN(4)]
	case 5:
		return randomAppendString(r)
	case 6:
		m := map[string]any{}
		for range r.IntN(5) {
			m[randomAppendString(r)] = randomAppendValue(r, depth+1)
		}
		return m
	default:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randomAppendValue(r, depth+1)
		}
		return l
	}
}

func randomAppendString(r *rand.Rand) string {
	parts := []string{"a", "name", "é", "\n", "\"", "\\", "<", ">", "&", "\x00", "\x1f", "\x7f", "\xff", "\u2028", "\u2029", "😀", " ", "\t", "\xed\xa0\x80"}
	var s string
	for range r.IntN(4) {
		s += parts[r.IntN(len(parts))]
	}
	return s
}

// TestAppendMarkingFloats: a float64 is written so that it decodes again
// as a float64 (Decode), integral or not; anything else as Append writes it.
func TestAppendMarkingFloats(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"integral float", map[string]any{"a": 1.0, "b": []any{float64(-2), int64(3)}}, `{"a":1.0,"b":[-2.0,3]}`},
		{"zero", 0.0, `0.0`},
		{"fraction", 1.5, `1.5`},
		{"exponent", 1e21, `1e+21`},
		{"integer", int64(7), `7`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := AppendMarkingFloats(nil, tc.v)
			if !ok || string(got) != tc.want {
				t.Fatalf("AppendMarkingFloats(%#v) = %s, %v; want %s", tc.v, got, ok, tc.want)
			}
			if m, ok := Decode([]byte(`{"v":` + string(got) + `}`)); !ok || !DeepEqual(m["v"], tc.v) {
				t.Fatalf("Decode(%s) = %#v, want %#v", got, m["v"], tc.v)
			}
		})
	}
}
