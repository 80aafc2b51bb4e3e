package abi

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestWriteDocumentsRoundTrip checks the documents of the write host
// functions through both this package's codec and encoding/json.
func TestWriteDocumentsRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		in    document
		empty func() document
	}{
		{"create", &WriteRequest{Object: RawJSON(widget)}, func() document { return &WriteRequest{} }},
		{"patch status", &WriteRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Widget", Namespace: "default", Name: "w1", Subresource: "status", Patch: RawJSON(`{"status":{"state":"Ready"}}`)}, func() document { return &WriteRequest{} }},
		{"delete with preconditions", &WriteRequest{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c", UID: "u-1", ResourceVersion: "42"}, func() document { return &WriteRequest{} }},
		{"written", &WriteResponse{Object: RawJSON(widget)}, func() document { return &WriteResponse{} }},
		{"conflict", &WriteResponse{Error: "the object has been modified", Reason: "Conflict", Code: 409}, func() document { return &WriteResponse{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.in.AppendJSON(nil)
			if !json.Valid(b) {
				t.Fatalf("invalid JSON: %s", b)
			}
			out := tt.empty()
			if err := out.UnmarshalJSON(b); err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if !reflect.DeepEqual(out, tt.in) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", out, tt.in)
			}
			viaStd := tt.empty()
			if err := json.Unmarshal(b, viaStd); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(viaStd, tt.in) {
				t.Fatalf("encoding/json round trip differs: %#v", viaStd)
			}
		})
	}
}
