package kinds

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestServedJSONOtherDocuments(t *testing.T) {
	sv := &Kind{Resource: Resource{GVR: widgets, Kind: "Widget"}}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"stored form", `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{}}` + "\n",
			`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"resourceVersion":"7","name":"a"},"spec":{}}`},
		{"empty metadata", `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{}}`,
			`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"resourceVersion":"7"}}`},
		{"other version", `{"apiVersion":"example.setpoint.dev/v2","kind":"Widget","metadata":{"name":"a"}}`, ""},
		{"no metadata", `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","spec":{}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(sv.ServedJSON([]byte(tc.doc), 7)); got != tc.want {
				t.Errorf("servedJSON = %s, want %s", got, tc.want)
			}
		})
	}
}

// Encode starts each document in a buffer sized from the last one, so an
// object of the size before encodes in one allocation fewer than from the
// default start; the bytes are the same either way, and one much smaller
// object brings the size back down.
func TestEncodeSizedFromTheLast(t *testing.T) {
	sv := &Kind{Resource: Resource{GVR: widgets, Kind: "Widget"}}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"},
		"spec":     map[string]any{"text": strings.Repeat("x", 4096)},
	}}
	cold, err := sv.Encode(obj)
	if err != nil {
		t.Fatal(err)
	}
	want, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	warm, err := sv.Encode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cold, want) || !bytes.Equal(warm, want) {
		t.Fatalf("Encode = %s / %s, want %s", cold, warm, want)
	}
	sized := testing.AllocsPerRun(20, func() { _, _ = sv.Encode(obj) })
	unsized := testing.AllocsPerRun(20, func() { sv.encodedSize.Store(0); _, _ = sv.Encode(obj) })
	if sized > unsized-1 {
		t.Errorf("allocations per Encode: %v sized from the last, %v from the default start; want at least one fewer", sized, unsized)
	}
	small := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget"}}
	if _, err := sv.Encode(small); err != nil {
		t.Fatal(err)
	}
	if n := sv.encodedSize.Load(); n > 1024 {
		t.Errorf("after a small object the next buffer starts at %d bytes", n)
	}
}
