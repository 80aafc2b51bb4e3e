package test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestWriteOptionsRefusedAsKube: options kube-apiserver v1.34's handlers
// refuse (ValidateDeleteOptions, ValidateCreateOptions,
// ValidateUpdateOptions) get its 422 Invalid naming the options' kind and
// the field, and the object is left as it was.
func TestWriteOptionsRefusedAsKube(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	const path = "/api/v1/namespaces/default/configmaps"
	const body = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"a":"b"}}`
	if code, b, err := s.Do("POST", path, s.Token, strings.NewReader(body)); err != nil || code != http.StatusCreated {
		t.Fatalf("create: %d %s %v", code, b, err)
	}
	for _, c := range []struct {
		method, query, body, message string
	}{
		{"DELETE", "/a?propagationPolicy=Sideways", "",
			`DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan", "nil"`},
		{"DELETE", "/a", `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Orphan","orphanDependents":true}`,
			`DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set`},
		{"DELETE", "/a?dryRun=", "",
			`DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: [""]: supported values: "All"`},
		{"DELETE", "?dryRun=Some", "",
			`DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: supported values: "All"`},
		{"POST", "?dryRun=", strings.Replace(body, `"a"}`, `"b"}`, 1),
			`CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: [""]: supported values: "All"`},
		{"POST", "?fieldValidation=Loose", strings.Replace(body, `"a"}`, `"b"}`, 1),
			`CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", "Strict", "Warn"`},
		{"PUT", "/a?dryRun=", body,
			`UpdateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: [""]: supported values: "All"`},
	} {
		code, b, err := s.Do(c.method, path+c.query, s.Token, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		reason, msg := decodeStatus(t, b)
		if code != http.StatusUnprocessableEntity || reason != "Invalid" || msg != c.message {
			t.Errorf("%s %s: %d %s\nwant 422 Invalid %q", c.method, c.query, code, b, c.message)
		}
	}
	if code, b, _ := s.Do("GET", path+"/a", s.Token, nil); code != http.StatusOK {
		t.Errorf("after the refused writes: %d %s, want 200", code, b)
	}
	if code, b, _ := s.Do("GET", path+"/b", s.Token, nil); code != http.StatusNotFound {
		t.Errorf("after the refused creates: %d %s, want 404", code, b)
	}
}
