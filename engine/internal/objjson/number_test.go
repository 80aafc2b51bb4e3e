package objjson

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

func TestNormalizeNumbers(t *testing.T) {
	tests := []struct {
		name     string
		in, want any
	}{
		{name: "integral float64", in: 3.0, want: int64(3)},
		{name: "negative integral float64", in: -3.0, want: int64(-3)},
		{name: "2^53 is exact", in: float64(1 << 53), want: int64(1 << 53)},
		{name: "above 2^53 stays a float", in: float64(1 << 54), want: float64(1 << 54)},
		{name: "fractional float64", in: 1.5, want: 1.5},
		{name: "float32", in: float32(2), want: int64(2)},
		{name: "int", in: 7, want: int64(7)},
		{name: "int32", in: int32(7), want: int64(7)},
		{name: "int64 unchanged", in: int64(1 << 60), want: int64(1 << 60)},
		{name: "NaN stays", in: math.NaN(), want: math.NaN()},
		{name: "infinity stays", in: math.Inf(1), want: math.Inf(1)},
		{name: "json.Number stays", in: json.Number("1"), want: json.Number("1")},
		{name: "string stays", in: "1", want: "1"},
		{name: "nested", in: map[string]any{"a": []any{1.0, map[string]any{"b": 2.0}}}, want: map[string]any{"a": []any{int64(1), map[string]any{"b": int64(2)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NormalizeNumbers(tt.in)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float64) bool {
				return a == b || math.IsNaN(a) && math.IsNaN(b)
			})); diff != "" {
				t.Errorf("NormalizeNumbers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalizeNumbersInPlace(t *testing.T) {
	m := map[string]any{"a": 1.0, "l": []any{2.0}}
	NormalizeNumbers(m)
	if m["a"] != int64(1) || m["l"].([]any)[0] != int64(2) {
		t.Errorf("NormalizeNumbers left %#v", m)
	}
}

func TestInteger(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want int64
		ok   bool
	}{
		{name: "int64", in: int64(5), want: 5, ok: true},
		{name: "integral float64", in: 5.0, want: 5, ok: true},
		{name: "json.Number", in: json.Number("5"), want: 5, ok: true},
		{name: "fractional", in: 5.5},
		{name: "2^63 is out of range", in: float64(1 << 63)},
		{name: "NaN", in: math.NaN()},
		{name: "string", in: "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Integer(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Integer = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestNormalizeNumbersIsUtiljson: a value a caller builds with Go numbers,
// normalised, is what the API's decoder (utiljson) gives for its JSON, for
// every number NormalizeNumbers claims: integral float64 within ±2^53, int,
// int32, integral float32, and fractional float64, which both keep.
// Beyond 2^53 they part on purpose: utiljson makes an int64 of the integer
// a float64 prints as, which the caller did not write.
func TestNormalizeNumbersIsUtiljson(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	number := func() any {
		switch r.IntN(6) {
		case 0:
			return float64(r.Int64N(1<<54) - 1<<53)
		case 1:
			return r.NormFloat64() * 1e3
		case 2:
			return r.IntN(1000) - 500
		case 3:
			return int32(r.Int32())
		case 4:
			return float32(r.IntN(1 << 24))
		default:
			return []any{0.0, math.Copysign(0, -1), float64(1 << 53), -float64(1 << 53), 0.5, 1e-300}[r.IntN(6)]
		}
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch r.IntN(4) {
		case 0:
			if depth < 3 {
				m := map[string]any{}
				for i := range r.IntN(4) {
					m[fmt.Sprint("k", i)] = value(depth + 1)
				}
				return m
			}
		case 1:
			if depth < 3 {
				l := make([]any, r.IntN(4))
				for i := range l {
					l[i] = value(depth + 1)
				}
				return l
			}
		}
		return number()
	}
	for i := range 3000 {
		v := map[string]any{"v": value(0)}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := utiljson.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, NormalizeNumbers(v)); diff != "" {
			t.Fatalf("case %d: %s (-utiljson +NormalizeNumbers):\n%s", i, b, diff)
		}
	}
	// The difference kept on purpose.
	big := float64(1 << 60)
	var want map[string]any
	_ = utiljson.Unmarshal([]byte(`{"v":1152921504606846976}`), &want)
	if got := NormalizeNumbers(map[string]any{"v": big}).(map[string]any)["v"]; got != big || want["v"] != int64(1<<60) {
		t.Errorf("2^60: NormalizeNumbers gives %#v, utiljson %#v; want a float64 and an int64", got, want["v"])
	}
}
