package apiserver

import (
	"encoding/json"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// ServiceAccounts keep their fields, lose unknown ones and are refused with
// fields of the wrong type or a name that is no DNS subdomain.
func TestServiceAccountKind(t *testing.T) {
	ts := newTestServer(t)
	const path = "/api/v1/namespaces/default/serviceaccounts"
	b := ts.mustDo(t, http.StatusCreated, request{method: http.MethodPost, path: path, body: `{"apiVersion":"v1","kind":"ServiceAccount",
		"metadata":{"name":"robot"},"secrets":[{"name":"s"}],"imagePullSecrets":[{"name":"pull"}],"automountServiceAccountToken":false,"spec":{"x":1}}`})
	var sa corev1.ServiceAccount
	if err := json.Unmarshal(b, &sa); err != nil {
		t.Fatal(err)
	}
	if len(sa.Secrets) != 1 || sa.Secrets[0].Name != "s" || len(sa.ImagePullSecrets) != 1 || sa.ImagePullSecrets[0].Name != "pull" ||
		sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken || sa.UID == "" {
		t.Fatalf("created %s", b)
	}
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	if _, ok := raw["spec"]; ok {
		t.Fatalf("an unknown field was kept: %s", b)
	}
	// Mistyped fields fail to decode (400, as kube-apiserver's decoder
	// answers); a bad name fails validation (422).
	for body, code := range map[string]int{
		`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"bad"},"secrets":"s"}`:                        http.StatusBadRequest,
		`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"bad"},"automountServiceAccountToken":"yes"}`: http.StatusBadRequest,
		`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"Not_A_Name"}}`:                               http.StatusUnprocessableEntity,
	} {
		ts.mustDo(t, code, request{method: http.MethodPost, path: path, body: body})
	}
	ts.mustDo(t, http.StatusOK, request{path: path + "/robot"})
	ts.mustDo(t, http.StatusOK, request{method: http.MethodDelete, path: path + "/robot"})
	ts.mustDo(t, http.StatusNotFound, request{path: path + "/robot"})
}
