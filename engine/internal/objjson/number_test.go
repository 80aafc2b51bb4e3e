package objjson

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
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
