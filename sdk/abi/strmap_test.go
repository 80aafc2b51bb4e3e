package abi

import (
	"reflect"
	"testing"
)

func TestStringMap(t *testing.T) {
	doc := RawJSON(`{"metadata":{"labels":{"a":"1","b\u0041":"x\"y","n":null},"bad":{"a":1},"list":["x"]}}`)
	tests := []struct {
		name string
		path []string
		want map[string]string
	}{
		{"strings", []string{"metadata", "labels"}, map[string]string{"a": "1", "bA": `x"y`, "n": ""}},
		{"number member", []string{"metadata", "bad"}, nil},
		{"not an object", []string{"metadata", "list"}, nil},
		{"absent", []string{"metadata", "annotations"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := doc.StringMap(tt.path...); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("StringMap(%v) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
	// The map is a copy: it outlives the document's bytes.
	b := []byte(`{"k":"v"}`)
	m := RawJSON(b).StringMap()
	b[6] = 'X'
	if m["k"] != "v" {
		t.Fatalf("StringMap aliases its input: %v", m)
	}
}
