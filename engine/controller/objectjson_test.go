package controller

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// objectJSONCases are objects whose encoding encodeObject must write
// byte for byte as Unstructured.MarshalJSON does.
func objectJSONCases() []map[string]any {
	return []map[string]any{
		widget().Object,
		{
			"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w1", "namespace": "default", "generation": int64(3),
				"labels":      map[string]any{"a/b": "x<y>&z", "é": "ü\u2028\u2029"},
				"annotations": map[string]any{"ctl": "a\x00b\x1f\n\t\r\b\f\"\\\x7f", "bad": "\xff\xfe"},
				"finalizers":  []any{"setpoint.dev/x"}},
			"spec": map[string]any{"n": int64(-42), "f": 1.5, "big": 1e21, "small": 1e-7, "zero": 0.0, "neg": -2.5e-9,
				"ok": true, "no": false, "nil": nil, "nilmap": map[string]any(nil), "nillist": []any(nil),
				"empty": map[string]any{}, "list": []any{int64(1), "two", []any{}, map[string]any{"k": nil}},
				"int": 7, "int32": int32(8), "float32": float32(0.1), "uint": uint64(math.MaxUint64)},
			"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True",
				"lastTransitionTime": "2026-11-21T04:00:01Z", "observedGeneration": int64(3)}}},
		},
	}
}

func TestEncodeObjectMatchesMarshalJSON(t *testing.T) {
	for i, obj := range objectJSONCases() {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			checkEncodeObject(t, obj)
		})
	}
}

// TestEncodeObjectRandom compares generated objects with every kind of
// value encodeObject writes itself or hands to encoding/json.
func TestEncodeObjectRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "plain", "a\"b", "<tag>", "&", "é", "\u2028", "\x01", "\xff", "k8s.io/name", "a b"}
	var gen func(depth int) any
	gen = func(depth int) any {
		switch n := r.IntN(9); {
		case n == 0:
			return nil
		case n == 1:
			return r.IntN(2) == 0
		case n == 2:
			return int64(r.IntN(2000) - 1000)
		case n == 3:
			return r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25))
		case n <= 5 || depth > 3:
			return strs[r.IntN(len(strs))]
		case n == 6:
			l := make([]any, r.IntN(4))
			for i := range l {
				l[i] = gen(depth + 1)
			}
			return l
		default:
			m := make(map[string]any)
			for range r.IntN(5) {
				m[strs[r.IntN(len(strs))]+strconv.Itoa(r.IntN(3))] = gen(depth + 1)
			}
			return m
		}
	}
	for range 500 {
		obj := map[string]any{"kind": "K"}
		for range 4 {
			obj[strs[r.IntN(len(strs))]] = gen(0)
		}
		checkEncodeObject(t, obj)
	}
}

func checkEncodeObject(t *testing.T, obj map[string]any) {
	t.Helper()
	want, err := (&unstructured.Unstructured{Object: obj}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := encodeObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimSuffix(want, []byte("\n"))) {
		t.Fatalf("encodeObject:\n got %s\nwant %s", got, want)
	}
}

func TestEncodeObjectRefusesNaN(t *testing.T) {
	if _, err := encodeObject(map[string]any{"x": math.NaN()}); err == nil {
		t.Fatal("NaN encoded without error")
	}
}

func BenchmarkEncodeObject(b *testing.B) {
	// A widget as the engine stores it once Ready.
	obj := objectJSONCases()[1]
	meta := obj["metadata"].(map[string]any)
	delete(meta, "annotations")
	meta["labels"] = map[string]any{"app": "widget"}
	meta["uid"], meta["resourceVersion"], meta["creationTimestamp"] = "0b6f3c9e-5d6c-4f0a-9a53-0e6f0f4d1a11", "42", "2026-11-21T04:00:00Z"
	obj["spec"] = map[string]any{"name": "Widget 1", "size": "medium"}
	b.Run("MarshalJSON", func(b *testing.B) {
		u := &unstructured.Unstructured{Object: obj}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := u.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encodeObject", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeObject(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
}
