package test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// decodeStatus decodes a Status answer.
func decodeStatus(t *testing.T, b []byte) (reason, message string) {
	t.Helper()
	var st struct{ Reason, Message string }
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return st.Reason, st.Message
}

// TestCreateWithResourceVersion: a create that carries a resourceVersion
// is refused as kube-apiserver v1.34's storage refuses it, a 500 with no
// reason; a dry run, a resourceVersion "0" and kubectl create and apply
// (which clear it) create the object.
func TestCreateWithResourceVersion(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	const path = "/api/v1/namespaces/default/configmaps"
	cm := func(name, rv string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","resourceVersion":"` + rv + `"},"data":{"a":"b"}}`
	}
	code, b, err := s.Do("POST", path, s.Token, strings.NewReader(cm("a", "5")))
	if err != nil {
		t.Fatal(err)
	}
	reason, msg := decodeStatus(t, b)
	if code != http.StatusInternalServerError || reason != "" || msg != "resourceVersion should not be set on objects to be created" {
		t.Errorf("create with resourceVersion 5: %d %s", code, b)
	}
	if code, b, _ := s.Do("GET", path+"/a", s.Token, nil); code != http.StatusNotFound {
		t.Errorf("after the refused create: %d %s, want 404", code, b)
	}
	if code, b, _ := s.Do("POST", path+"?dryRun=All", s.Token, strings.NewReader(cm("a", "5"))); code != http.StatusCreated {
		t.Errorf("dry-run create with resourceVersion 5: %d %s, want 201", code, b)
	}
	if code, b, _ := s.Do("POST", path, s.Token, strings.NewReader(cm("zero", "0"))); code != http.StatusCreated {
		t.Errorf("create with resourceVersion 0: %d %s, want 201", code, b)
	}
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: NAME\n  namespace: default\n  resourceVersion: \"7\"\ndata:\n  a: b\n"
	s.MustKubectl(strings.Replace(manifest, "NAME", "by-create", 1), "create", "-f", "-")
	s.MustKubectl(strings.Replace(manifest, "NAME", "by-apply", 1), "apply", "-f", "-")
}
