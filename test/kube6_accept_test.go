package test

import (
	"net/http"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestAcceptNotAcceptable: a resource request whose Accept names no media
// type the server answers in is a 406 NotAcceptable, as kube-apiserver
// v1.34's negotiation answers it, whether the object exists or not; one
// that also takes JSON, YAML, protobuf or anything is answered.
func TestAcceptNotAcceptable(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	s.MustKubectl("", "create", "configmap", "cm", "--from-literal=a=b")
	const path = "/api/v1/namespaces/default/configmaps"
	const message = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
	for _, c := range []struct {
		path, accept string
		code         int
	}{
		{path + "/cm", "application/xml", http.StatusNotAcceptable},
		{path + "/missing", "application/xml", http.StatusNotAcceptable},
		{path, "text/html", http.StatusNotAcceptable},
		{path + "/cm", "text/plain, application/xml", http.StatusNotAcceptable},
		{path + "/cm", "application/xml, application/json", http.StatusOK},
		{path + "/cm", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", http.StatusOK},
		{path + "/cm", "application/*", http.StatusOK},
		{path + "/cm", "application/yaml", http.StatusOK},
		{path + "/cm", "application/vnd.kubernetes.protobuf, application/json", http.StatusOK},
		{path, "application/json;as=Table;v=v1;g=meta.k8s.io, application/json", http.StatusOK},
	} {
		code, b, err := s.DoWith("GET", c.path, s.Token, nil, testserver.DoOptions{Header: http.Header{"Accept": {c.accept}}})
		if err != nil {
			t.Fatal(err)
		}
		if code != c.code {
			t.Errorf("GET %s with Accept %q: %d %s, want %d", c.path, c.accept, code, b, c.code)
			continue
		}
		if code == http.StatusNotAcceptable {
			if reason, msg := decodeStatus(t, b); reason != "NotAcceptable" || msg != message {
				t.Errorf("GET %s with Accept %q: %s, want reason NotAcceptable, message %q", c.path, c.accept, b, message)
			}
		}
	}
	s.MustKubectl("", "get", "configmap", "cm")
}
