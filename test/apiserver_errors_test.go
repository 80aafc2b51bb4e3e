package test

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAPIErrors checks the Status codes and reasons the built server answers
// over HTTPS with the admin token.
func TestAPIErrors(t *testing.T) {
	s, _ := clientGoSetup(t, "errors")
	const widgets = "/apis/example.setpoint.dev/v1/namespaces/errors/widgets"
	post := func(body string) (int, []byte) {
		code, b, err := s.Do("POST", widgets, s.Token, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return code, b
	}
	if code, b := post(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"name":"A","size":"small"}}`); code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		code   int32
		reason metav1.StatusReason
		causes []string
	}{
		{name: "not found", method: "GET", path: widgets + "/nope", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "unknown kind", method: "GET", path: "/apis/example.setpoint.dev/v1/gadgets", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "method not allowed", method: "PUT", path: widgets, body: "{}", code: 405, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "already exists", method: "POST", path: widgets, body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"name":"A","size":"small"}}`,
			code: 409, reason: metav1.StatusReasonAlreadyExists},
		{name: "conflict", method: "PUT", path: widgets + "/a", body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","resourceVersion":"1"},"spec":{"name":"A","size":"large"}}`,
			code: 409, reason: metav1.StatusReasonConflict},
		{name: "update without resourceVersion", method: "PUT", path: widgets + "/a", body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"name":"A","size":"large"}}`,
			code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.resourceVersion"}},
		{name: "invalid, one cause per field", method: "POST", path: widgets, body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"size":"huge","name":7}}`,
			code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"spec.size", "spec.name"}},
		{name: "too large", method: "POST", path: widgets, body: `{"x":"` + strings.Repeat("x", 3<<20) + `"}`, code: 413, reason: metav1.StatusReasonRequestEntityTooLarge},
		{name: "too deep", method: "POST", path: widgets, body: strings.Repeat("[", 1000) + strings.Repeat("]", 1000), code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "bad selector", method: "GET", path: widgets + "?labelSelector=a%20in%20(", code: 400, reason: metav1.StatusReasonBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body *strings.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			var code int
			var b []byte
			var err error
			if body != nil {
				code, b, err = s.Do(tt.method, tt.path, s.Token, body)
			} else {
				code, b, err = s.Do(tt.method, tt.path, s.Token, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			var st metav1.Status
			if err := json.Unmarshal(b, &st); err != nil || st.Kind != "Status" {
				t.Fatalf("%d %s: not a Status", code, b)
			}
			if int32(code) != tt.code || st.Code != tt.code || st.Reason != tt.reason {
				t.Fatalf("got %d %d %s (%s), want %d %s", code, st.Code, st.Reason, st.Message, tt.code, tt.reason)
			}
			for _, f := range tt.causes {
				found := false
				if st.Details != nil {
					for _, c := range st.Details.Causes {
						found = found || c.Field == f
					}
				}
				if !found {
					t.Errorf("no cause for %s in %s", f, b)
				}
			}
		})
	}
}
