package test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestTokenRequestBoundToNoName: a TokenRequest whose boundObjectRef is a
// Secret, a Pod or a Node with no name is a 400 "Name parameter
// required.", as kube-apiserver v1.34's storage answers the look-up by an
// empty name.
func TestTokenRequestBoundToNoName(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	s.MustKubectl("", "create", "serviceaccount", "robot")
	for _, kind := range []string{"Secret", "Pod", "Node"} {
		body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"apiVersion":"v1","kind":"` + kind + `"}}}`
		code, b, err := s.Do("POST", "/api/v1/namespaces/default/serviceaccounts/robot/token", s.Token, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		reason, msg := decodeStatus(t, b)
		if code != http.StatusBadRequest || reason != "BadRequest" || msg != "Name parameter required." {
			t.Errorf("bound to a %s with no name: %d %s, want 400 \"Name parameter required.\"", kind, code, b)
		}
	}
}
