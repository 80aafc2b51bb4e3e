package plugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// TestWrites checks what each write function sends to which host function
// and how it reads the answers, errors with their reason included.
func TestWrites(t *testing.T) {
	var gotFn HostFunc
	var got abi.WriteRequest
	answer := ""
	h := NewHost(func(fn HostFunc, req []byte) []byte {
		gotFn = fn
		if err := got.UnmarshalJSON(req); err != nil {
			t.Fatalf("request %s: %v", req, err)
		}
		return []byte(answer)
	})
	obj := abi.RawJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}`)
	ref := abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c", UID: "u-1"}

	answer = `{"object":{"kind":"ConfigMap","metadata":{"resourceVersion":"7"}}}`
	tests := []struct {
		name    string
		write   func() (abi.RawJSON, error)
		fn      HostFunc
		sub     string
		checkRq func(abi.WriteRequest) bool
	}{
		{"create", func() (abi.RawJSON, error) { return Create(h, obj) }, HostCreate, "", func(r abi.WriteRequest) bool { return string(r.Object) == string(obj) }},
		{"update", func() (abi.RawJSON, error) { return Update(h, obj) }, HostUpdate, "", func(r abi.WriteRequest) bool { return string(r.Object) == string(obj) }},
		{"update status", func() (abi.RawJSON, error) { return UpdateStatus(h, obj) }, HostUpdate, "status", func(r abi.WriteRequest) bool { return string(r.Object) == string(obj) }},
		{"patch", func() (abi.RawJSON, error) { return Patch(h, ref, []byte(`{"data":{"a":"b"}}`)) }, HostPatch, "", func(r abi.WriteRequest) bool {
			return r.Name == "c" && r.Namespace == "ns" && r.Kind == "ConfigMap" && string(r.Patch) == `{"data":{"a":"b"}}` && r.UID == ""
		}},
		{"patch status", func() (abi.RawJSON, error) { return PatchStatus(h, ref, []byte(`{"status":{}}`)) }, HostPatch, "status", func(r abi.WriteRequest) bool { return r.Name == "c" && string(r.Patch) == `{"status":{}}` }},
		{"delete", func() (abi.RawJSON, error) { return nil, Delete(h, ref) }, HostDelete, "", func(r abi.WriteRequest) bool { return r.Name == "c" && r.UID == "u-1" && r.Object == nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.write()
			if err != nil {
				t.Fatal(err)
			}
			if gotFn != tt.fn || got.Subresource != tt.sub || !tt.checkRq(got) {
				t.Errorf("sent %v %+v", gotFn, got)
			}
			if tt.fn != HostDelete && out.String("metadata", "resourceVersion") != "7" {
				t.Errorf("returned %s", out)
			}
		})
	}

	answer = `{"error":"configmaps \"c\" already exists","reason":"AlreadyExists","code":409}`
	_, err := Create(h, obj)
	var we *WriteError
	if !errors.As(err, &we) || we.Code != 409 || !IsAlreadyExists(err) || IsConflict(err) || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Create of an existing object = %#v", err)
	}
	answer = `{"error":"host: permission denied: plugin \"p\" may not write Secret","reason":"Forbidden","code":403}`
	if err := Delete(h, ref); !IsForbidden(err) || IsNotFound(err) {
		t.Errorf("denied Delete = %v", err)
	}
	answer = `not json`
	if _, err := Update(h, obj); err == nil || ReasonOf(err) != "" {
		t.Errorf("Update with a malformed answer = %v", err)
	}
}

// TestWriteWithoutWriter checks that a Host that cannot write says so.
func TestWriteWithoutWriter(t *testing.T) {
	var h struct{ Host }
	if _, err := Create(h, abi.RawJSON(`{}`)); ReasonOf(err) != ReasonMethodNotAllowed {
		t.Errorf("Create on a read-only Host = %v", err)
	}
}
