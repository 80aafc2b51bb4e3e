package apiserver

import (
	"net/http"
	"testing"
)

// deprecatedCRD serves v1alpha1 (deprecated, default warning), v1beta1
// (deprecated, its own warning) and v1.
const deprecatedCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: olds.test.setpoint.dev}
spec:
  group: test.setpoint.dev
  scope: Namespaced
  names: {plural: olds, singular: old, kind: Old}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    deprecated: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    deprecationWarning: "v1beta1 goes away in 2027: use v1"
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestDeprecatedVersionWarns checks that every request to a deprecated CRD
// version carries Kubernetes' Warning header, and others none.
func TestDeprecatedVersionWarns(t *testing.T) {
	ts := newTestServer(t)
	ts.mustDo(t, http.StatusCreated, request{method: "POST", path: crdPath, contentType: "application/yaml", body: deprecatedCRD})
	tests := []struct {
		rq   request
		want string
	}{
		{rq: request{path: "/apis/test.setpoint.dev/v1alpha1/namespaces/default/olds"},
			want: `299 - "test.setpoint.dev/v1alpha1 Old is deprecated; use test.setpoint.dev/v1 Old"`},
		{rq: request{method: "POST", path: "/apis/test.setpoint.dev/v1alpha1/namespaces/default/olds",
			body: `{"apiVersion":"test.setpoint.dev/v1alpha1","kind":"Old","metadata":{"name":"a"}}`},
			want: `299 - "test.setpoint.dev/v1alpha1 Old is deprecated; use test.setpoint.dev/v1 Old"`},
		{rq: request{path: "/apis/test.setpoint.dev/v1beta1/namespaces/default/olds/a"},
			want: `299 - "v1beta1 goes away in 2027: use v1"`},
		{rq: request{path: "/apis/test.setpoint.dev/v1/namespaces/default/olds/a"}},
	}
	for _, tt := range tests {
		code, b, h := ts.do(t, tt.rq)
		if code >= 300 {
			t.Fatalf("%s %s: %d %s", tt.rq.method, tt.rq.path, code, b)
		}
		got := h.Values("Warning")
		if tt.want == "" && len(got) != 0 || tt.want != "" && (len(got) != 1 || got[0] != tt.want) {
			t.Errorf("%s %s: Warning %q, want %q", tt.rq.method, tt.rq.path, got, tt.want)
		}
	}
}
