package controller

import (
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
		got, gotErr := decodeChild([]byte(raw))
		want := &unstructured.Unstructured{}
		wantErr := want.UnmarshalJSON([]byte(raw))
		if (gotErr != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, UnmarshalJSON's %v", raw, gotErr, wantErr)
			continue
		}
		if gotErr == nil {
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Errorf("%s: differs from UnmarshalJSON (-want +got):\n%s", raw, diff)
			}
		}
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
