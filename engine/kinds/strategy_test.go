package kinds

import "testing"

func TestHasNull(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want bool
	}{
		{"null", nil, true},
		{"scalar", "x", false},
		{"object without", map[string]any{"a": "x", "b": map[string]any{"c": []any{int64(1), "y"}}}, false},
		{"member", map[string]any{"a": "x", "b": nil}, true},
		{"deep member", map[string]any{"a": map[string]any{"b": map[string]any{"c": nil}}}, true},
		{"list item", map[string]any{"a": []any{"x", nil}}, true},
		{"object in a list", []any{map[string]any{"a": nil}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hasNull(tc.v); got != tc.want {
				t.Errorf("hasNull = %v, want %v", got, tc.want)
			}
		})
	}
}
