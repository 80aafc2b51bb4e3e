package controller

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// decodeChild reads a desired child as Unstructured.UnmarshalJSON does:
// the same object, and an error where it gives one.
func TestDecodeChildMatchesUnmarshalJSON(t *testing.T) {
	for _, raw := range []string{
		`{"apiVersion":"example.setpoint.dev/v1","kind":"Gizmo","metadata":{"name":"g","labels":{"a":"b"}},"spec":{"size":"small","n":3,"f":1.5,"big":12345678901234567890,"list":[1,"x",null,true,{"k":[]}]}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v\u00e9\n"}}`,
		`{"kind":"OnlyKind"}`,
		`{"apiVersion":"v1","metadata":{"name":"no-kind"}}`,
		`{"kind":""}`,
		`[{"kind":"X"}]`,
		`"text"`,
		`{"kind":"X",}`,
		`{"kind":"X"} trailing`,
		``,
		`{"kind":"X","a":1,"a":2}`,
	} {
		checkDecodeChild(t, []byte(raw))
	}
}

// checkDecodeChild fails unless decodeChild gives what
// Unstructured.UnmarshalJSON gives for raw: the same object, or an error.
// It reports whether it gave an object.
func checkDecodeChild(t *testing.T, raw []byte) bool {
	t.Helper()
	got, gotErr := decodeChild(raw)
	want := &unstructured.Unstructured{}
	wantErr := want.UnmarshalJSON(raw)
	if (gotErr != nil) != (wantErr != nil) {
		t.Errorf("%s: error %v, UnmarshalJSON's %v", raw, gotErr, wantErr)
		return false
	}
	if gotErr == nil {
		if diff := cmp.Diff(want.Object, got.Object); diff != "" {
			t.Errorf("%s: differs from UnmarshalJSON (-want +got):\n%s", raw, diff)
		}
	}
	return gotErr == nil
}

// TestDecodeChildRandom compares decodeChild with UnmarshalJSON on random
// children, with and without a kind, and on copies with one byte changed.
func TestDecodeChildRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	decoded := 0
	for range 3000 {
		obj, _ := randomJSON(r, 1).(map[string]any)
		if obj == nil {
			obj = map[string]any{"spec": randomJSON(r, 1)}
		}
		switch r.IntN(4) {
		case 0:
		case 1:
			obj["kind"] = ""
		default:
			obj["apiVersion"], obj["kind"] = "example.setpoint.dev/v1", "Gizmo"
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if checkDecodeChild(t, raw) {
			decoded++
		}
		i := r.IntN(len(raw))
		checkDecodeChild(t, append(raw[:i:i], raw[i+1:]...))
		if t.Failed() {
			return
		}
	}
	if decoded < 1000 {
		t.Errorf("only %d of 3000 children decoded", decoded)
	}
}

// BenchmarkDecodeChild: a WidgetProvision as the example plugin desires it,
// through decodeChild and through Unstructured.UnmarshalJSON.
func BenchmarkDecodeChild(b *testing.B) {
	raw := []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"WidgetProvision","metadata":{"name":"w-1","labels":{"app":"widget"}},"spec":{"widget":"Widget 1","size":"medium","capacity":4}}`)
	b.Run("decodeChild", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeChild(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UnmarshalJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
