package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestSemanticEqualIsSemanticDeepEqual(t *testing.T) {
	shared := map[string]any{"n": math.NaN()}
	sharedList := []any{math.NaN()}
	for _, tc := range []struct {
		name string
		a, b map[string]any
		want bool
	}{
		{"equal", map[string]any{"a": int64(1), "b": []any{"x", true, nil}}, map[string]any{"a": int64(1), "b": []any{"x", true, nil}}, true},
		{"int64 and float64", map[string]any{"a": int64(1)}, map[string]any{"a": float64(1)}, false},
		{"nil and empty map", map[string]any{"a": map[string]any(nil)}, map[string]any{"a": map[string]any{}}, true},
		{"nil and empty slice", map[string]any{"a": []any(nil)}, map[string]any{"a": []any{}}, true},
		{"nil map and nil", map[string]any{"a": map[string]any(nil)}, map[string]any{"a": nil}, false},
		{"missing key and nil", map[string]any{"a": nil, "b": "x"}, map[string]any{"c": nil, "b": "x"}, false},
		{"NaN", map[string]any{"a": math.NaN()}, map[string]any{"a": math.NaN()}, false},
		{"NaN in the same map", map[string]any{"a": shared}, map[string]any{"a": shared}, true},
		{"NaN in the same slice", map[string]any{"a": sharedList}, map[string]any{"a": sharedList}, true},
		{"zero and minus zero", map[string]any{"a": 0.0}, map[string]any{"a": math.Copysign(0, -1)}, true},
		{"other types, equal", map[string]any{"q": resource.MustParse("1"), "t": metav1.Unix(1, 0)}, map[string]any{"q": resource.MustParse("1000m"), "t": metav1.Unix(1, 0)}, true},
		{"int and int64", map[string]any{"a": 1}, map[string]any{"a": int64(1)}, false},
		{"nil maps", nil, nil, true},
		{"nil and empty", nil, map[string]any{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := equality.Semantic.DeepEqual(tc.a, tc.b); want != tc.want {
				t.Fatalf("equality.Semantic says %v; the case expects %v", want, tc.want)
			}
			if got := semanticEqual(tc.a, tc.b); got != tc.want {
				t.Errorf("semanticEqual = %v, want %v", got, tc.want)
			}
		})
	}
}

// randomValue returns a value of an Unstructured object: mostly of the types
// JSON decoding gives, with NaN, nil and empty maps and slices, and now and
// then another type.
func randomValue(r *rand.Rand, depth int) any {
	n := 11
	if depth > 3 {
		n = 7
	}
	switch r.IntN(n) {
	case 0:
		return fmt.Sprint("s", r.IntN(3))
	case 1:
		return int64(r.IntN(3))
	case 2:
		return []float64{0, 1, math.NaN()}[r.IntN(3)]
	case 3:
		return r.IntN(2) == 0
	case 4:
		return nil
	case 5:
		if r.IntN(8) == 0 {
			return []any{1, resource.MustParse("1"), float32(1)}[r.IntN(3)]
		}
		return int64(1)
	case 6:
		return []any{map[string]any(nil), []any(nil), map[string]any{}, []any{}}[r.IntN(4)]
	case 7, 8:
		m := map[string]any{}
		for range r.IntN(4) {
			m[fmt.Sprint("k", r.IntN(4))] = randomValue(r, depth+1)
		}
		return m
	default:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randomValue(r, depth+1)
		}
		return l
	}
}

// mutate returns a copy of v with at most one change, sharing some maps and
// slices with v.
func mutate(r *rand.Rand, v any) any {
	switch x := v.(type) {
	case map[string]any:
		if r.IntN(4) == 0 {
			return x // shared
		}
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = e
		}
		switch r.IntN(5) {
		case 0:
			m[fmt.Sprint("k", r.IntN(4))] = randomValue(r, 3)
		case 1:
			for k := range m {
				delete(m, k)
				break
			}
		default:
			for k, e := range m {
				m[k] = mutate(r, e)
				break
			}
		}
		return m
	case []any:
		if r.IntN(4) == 0 {
			return x
		}
		l := append([]any(nil), x...)
		if len(l) > 0 {
			i := r.IntN(len(l))
			l[i] = mutate(r, l[i])
		}
		return l
	}
	if r.IntN(3) == 0 {
		return randomValue(r, 3)
	}
	return runtime.DeepCopyJSONValue(jsonOnly(v))
}

// jsonOnly keeps v when DeepCopyJSONValue can copy it.
func jsonOnly(v any) any {
	if isJSONType(v) {
		return v
	}
	return int64(1)
}

// TestSemanticEqualRandom compares semanticEqual with equality.Semantic on
// random objects and their variants.
func TestSemanticEqualRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var equal, unequal int
	for i := range 20000 {
		a, _ := randomValue(r, 0).(map[string]any)
		if a == nil {
			a = map[string]any{"x": randomValue(r, 1)}
		}
		b, _ := mutate(r, a).(map[string]any)
		want := equality.Semantic.DeepEqual(a, b)
		if got := semanticEqual(a, b); got != want {
			t.Fatalf("case %d: semanticEqual(%#v, %#v) = %v, equality.Semantic says %v", i, a, b, got, want)
		}
		if want {
			equal++
		} else {
			unequal++
		}
	}
	if equal < 1000 || unequal < 1000 {
		t.Errorf("%d equal and %d unequal pairs; want both well represented", equal, unequal)
	}
}
