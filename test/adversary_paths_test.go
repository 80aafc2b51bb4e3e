package test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestEscapedPathSegments sends the built server resource paths in which
// the client escaped bytes it need not have (%3A for the colon of a
// ClusterRole's name, %2D for a dash, the namespace escaped too). Like
// kube-apiserver, and like the authorizer, which read the decoded path, the
// server must serve the object the decoded path names, not answer 404 for
// an object that exists or act on a name no object can have.
func TestEscapedPathSegments(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		var r *strings.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		var code int
		var b []byte
		var err error
		if r != nil {
			code, b, err = s.Do(method, path, s.Token, r)
		} else {
			code, b, err = s.Do(method, path, s.Token, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		return code, b
	}
	name := func(b []byte) string {
		var o struct {
			Metadata struct{ Name, Namespace string }
		}
		_ = json.Unmarshal(b, &o)
		return o.Metadata.Namespace + "/" + o.Metadata.Name
	}
	if code, b := do("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Aaggregate-to-admin", ""); code != 200 || name(b) != "/system:aggregate-to-admin" {
		t.Fatalf("get with an escaped colon: %d %.300s", code, b)
	}
	const cms = "/api/v1/namespaces/default/configmaps"
	if code, b := do("POST", "/api/v1/namespaces/d%65fault/configmaps",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-x"},"data":{"k":"v"}}`); code != 201 || name(b) != "default/cm-x" {
		t.Fatalf("create in an escaped namespace: %d %.300s", code, b)
	}
	code, b := do("GET", cms+"/cm%2Dx", "")
	if code != 200 || name(b) != "default/cm-x" {
		t.Fatalf("get with an escaped dash: %d %.300s", code, b)
	}
	if code, b := do("PUT", cms+"/cm%2Dx", strings.Replace(string(b), `"k":"v"`, `"k":"w"`, 1)); code != 200 || !strings.Contains(string(b), `"k":"w"`) {
		t.Fatalf("update with an escaped dash: %d %.300s", code, b)
	}
	if code, b := do("PATCH", cms+"/cm%2dx", ""); code != 415 && code != 400 {
		t.Fatalf("patch without a body type: %d %.300s", code, b)
	}
	if code, b := do("DELETE", cms+"/cm%2Dx", ""); code != 200 {
		t.Fatalf("delete with an escaped dash: %d %.300s", code, b)
	}
	if code, b := do("GET", cms+"/cm-x", ""); code != 404 {
		t.Fatalf("get after the delete: %d %.300s", code, b)
	}
	// An escaped slash is a slash once decoded, as kube-apiserver reads it:
	// here a subresource ConfigMaps do not have.
	if code, b := do("GET", cms+"/a%2Fb", ""); code != 404 {
		t.Fatalf("get a%%2Fb: %d %.300s", code, b)
	}
}
