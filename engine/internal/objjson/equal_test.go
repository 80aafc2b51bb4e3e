package objjson

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
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
			if got := SemanticEqual(tc.a, tc.b); got != tc.want {
				t.Errorf("SemanticEqual = %v, want %v", got, tc.want)
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

// TestSemanticEqualRandom compares SemanticEqual with equality.Semantic on
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
		if got := SemanticEqual(a, b); got != want {
			t.Fatalf("case %d: SemanticEqual(%#v, %#v) = %v, equality.Semantic says %v", i, a, b, got, want)
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

func TestDeepEqualIsReflectDeepEqual(t *testing.T) {
	nan := math.NaN()
	values := []any{
		nil, "a", "b", "", int64(1), int64(2), float64(1), 1.5, nan, true, false,
		map[string]any(nil), map[string]any{}, map[string]any{"a": int64(1)}, map[string]any{"a": float64(1)},
		map[string]any{"a": int64(1), "b": nil}, map[string]any{"a": int64(1), "c": nil}, map[string]any{"a": []any{"x"}},
		[]any(nil), []any{}, []any{"x"}, []any{"x", "y"}, []any{"y", "x"}, []any{map[string]any{"a": "b"}},
		map[string]string{"a": "b"}, []string{"x"}, int(1), int32(1),
	}
	for _, a := range values {
		for _, b := range values {
			if got, want := DeepEqual(a, b), reflect.DeepEqual(a, b); got != want {
				t.Errorf("DeepEqual(%#v, %#v) = %v, reflect.DeepEqual %v", a, b, got, want)
			}
			// The same, nested.
			na, nb := map[string]any{"k": []any{a}}, map[string]any{"k": []any{b}}
			if got, want := DeepEqual(na, nb), reflect.DeepEqual(na, nb); got != want {
				t.Errorf("DeepEqual(%#v, %#v) = %v, reflect.DeepEqual %v", na, nb, got, want)
			}
		}
	}
}

func TestSubsetAndValueEqual(t *testing.T) {
	tests := []struct {
		name          string
		a, b          any
		subset, equal bool
	}{
		{name: "equal scalars", a: "x", b: "x", subset: true, equal: true},
		{name: "int64 and float64 of one value", a: int64(3), b: float64(3), subset: true, equal: true},
		{name: "different numbers", a: int64(3), b: int64(4)},
		{name: "number and string", a: int64(3), b: "3"},
		// float64 holds no integer above 2^53 exactly: converting made
		// these equal, so a change in the low bits was never written.
		{name: "int64 neighbours above 2^53", a: map[string]any{"bytes": int64(1<<53 + 1)}, b: map[string]any{"bytes": int64(1 << 53)}},
		{name: "large int64 and the float64 it rounds to", a: int64(1<<53 + 1), b: float64(1 << 53)},
		{name: "large int64 and the float64 of its exact value", a: int64(1 << 62), b: float64(1 << 62), subset: true, equal: true},
		{name: "int64 and a fractional float64", a: int64(3), b: 3.5},
		{name: "int and int64 of one value", a: 7, b: int64(7), subset: true, equal: true},
		{name: "max int64 and 2^63 as float64", a: int64(math.MaxInt64), b: float64(1 << 63)},
		{name: "map with fewer keys", a: map[string]any{"a": int64(1)}, b: map[string]any{"a": int64(1), "b": true}, subset: true},
		{name: "map with more keys", a: map[string]any{"a": int64(1), "b": true}, b: map[string]any{"a": int64(1)}},
		{name: "null entry equals missing", a: map[string]any{"a": nil}, b: map[string]any{}, subset: true, equal: true},
		{name: "lists of different length", a: []any{"a"}, b: []any{"a", "b"}},
		{name: "lists element by element", a: []any{map[string]any{"x": "1"}}, b: []any{map[string]any{"x": "1", "y": "2"}}, subset: true},
		{name: "empty map against missing", a: map[string]any{}, b: nil, subset: true},
		{name: "both nil", a: nil, b: nil, subset: true, equal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Subset(tt.a, tt.b); got != tt.subset {
				t.Errorf("Subset = %v, want %v", got, tt.subset)
			}
			if got := ValueEqual(tt.a, tt.b); got != tt.equal {
				t.Errorf("ValueEqual = %v, want %v", got, tt.equal)
			}
		})
	}
}

// TestEqualityRulesDiffer pins where DeepEqual, SemanticEqual and
// ValueEqual part: each pair is compared as the value of one key, so that
// SemanticEqual, which takes objects, sees it too.
func TestEqualityRulesDiffer(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name                   string
		a, b                   any
		deep, semantic, values bool
	}{
		{name: "same document", a: map[string]any{"x": []any{"a", int64(1), 1.5, true, nil}}, b: map[string]any{"x": []any{"a", int64(1), 1.5, true, nil}}, deep: true, semantic: true, values: true},
		{name: "int64 and float64 of one value", a: int64(1), b: float64(1), values: true},
		{name: "int and int64 of one value", a: 1, b: int64(1), values: true},
		{name: "json.Number and int64 of one value", a: json.Number("7"), b: int64(7), values: true},
		{name: "int64 and a fractional float64", a: int64(1), b: 1.5},
		{name: "nil map and empty map", a: map[string]any(nil), b: map[string]any{}, semantic: true, values: true},
		{name: "nil slice and empty slice", a: []any(nil), b: []any{}, semantic: true, values: true},
		{name: "null and empty map", a: nil, b: map[string]any{}},
		{name: "null entry and missing entry", a: map[string]any{"k": nil}, b: map[string]any{}, values: true},
		{name: "NaN and NaN", a: nan, b: nan},
		{name: "zero and minus zero", a: 0.0, b: math.Copysign(0, -1), deep: true, semantic: true, values: true},
		{name: "string and number", a: "1", b: int64(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := map[string]any{"v": tt.a}, map[string]any{"v": tt.b}
			if got := DeepEqual(a, b); got != tt.deep {
				t.Errorf("DeepEqual = %v, want %v", got, tt.deep)
			}
			if got, want := DeepEqual(a, b), reflect.DeepEqual(a, b); got != want {
				t.Errorf("DeepEqual = %v, reflect.DeepEqual %v", got, want)
			}
			if got := SemanticEqual(a, b); got != tt.semantic {
				t.Errorf("SemanticEqual = %v, want %v", got, tt.semantic)
			}
			if got, want := SemanticEqual(a, b), equality.Semantic.DeepEqual(a, b); got != want {
				t.Errorf("SemanticEqual = %v, equality.Semantic %v", got, want)
			}
			if got := ValueEqual(a, b); got != tt.values {
				t.Errorf("ValueEqual = %v, want %v", got, tt.values)
			}
			if got := ValueEqual(b, a); got != tt.values {
				t.Errorf("ValueEqual with the sides swapped = %v, want %v", got, tt.values)
			}
		})
	}
}

// TestValueEqualRandom checks ValueEqual against its definition on random
// documents: two values are equal when their JSON, decoded the one way the
// API decodes it and with null entries dropped, is the same.
func TestValueEqualRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var equal, unequal int
	for i := range 5000 {
		a, _ := randomDocument(r, 0).(map[string]any)
		if a == nil {
			a = map[string]any{"x": randomDocument(r, 1)}
		}
		b, _ := mutateDocument(r, a).(map[string]any)
		want := canonical(t, a) == canonical(t, b)
		if got := ValueEqual(a, b); got != want {
			t.Fatalf("case %d: ValueEqual(%#v, %#v) = %v; their canonical JSON says %v", i, a, b, got, want)
		}
		if want {
			equal++
		} else {
			unequal++
		}
	}
	if equal < 500 || unequal < 500 {
		t.Errorf("%d equal and %d unequal pairs; want both well represented", equal, unequal)
	}
}

// randomDocument returns a JSON value with numbers in several Go types and
// null map entries, but no NaN (which no JSON holds).
func randomDocument(r *rand.Rand, depth int) any {
	n := 9
	if depth > 3 {
		n = 6
	}
	switch r.IntN(n) {
	case 0:
		return fmt.Sprint("s", r.IntN(3))
	case 1:
		return []any{int64(1), float64(1), 1, json.Number("1"), int64(2), 2.5, int64(1<<53 + 1), float64(1 << 53)}[r.IntN(8)]
	case 2:
		return r.IntN(2) == 0
	case 3:
		return nil
	case 4:
		return []any{map[string]any(nil), []any(nil), map[string]any{}, []any{}}[r.IntN(4)]
	case 5:
		return int64(r.IntN(2))
	case 6, 7:
		m := map[string]any{}
		for range r.IntN(4) {
			m[fmt.Sprint("k", r.IntN(4))] = randomDocument(r, depth+1)
		}
		return m
	default:
		l := make([]any, r.IntN(3))
		for i := range l {
			l[i] = randomDocument(r, depth+1)
		}
		return l
	}
}

// mutateDocument returns a deep copy of v with at most one change.
func mutateDocument(r *rand.Rand, v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = mutateDocument(r, e)
		}
		if r.IntN(4) == 0 {
			m[fmt.Sprint("k", r.IntN(4))] = randomDocument(r, 3)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = mutateDocument(r, e)
		}
		return l
	}
	if r.IntN(4) == 0 {
		return randomDocument(r, 3)
	}
	return v
}

// canonical returns the JSON of v decoded as the API decodes it, with null
// map entries dropped, the nil maps and slices written as empty ones and
// integral numbers written as integers.
func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(dropNulls(v))
	if err != nil {
		t.Fatal(err)
	}
	var d any
	if err := utiljson.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	b, err = json.Marshal(dropNulls(d))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if e != nil {
				out[k] = dropNulls(e)
			}
		}
		return out
	case []any:
		out := []any{}
		for _, e := range x {
			out = append(out, dropNulls(e))
		}
		return out
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x)
		}
	}
	return v
}
