package test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestKubectlTokenBoundToSecret: `kubectl create token SA
// --bound-object-kind Secret --bound-object-name S` binds the token to the
// Secret, as kube-apiserver v1.34 does: its claims carry the Secret's name
// and UID, and it works while the Secret exists, not once it is deleted,
// nor once a Secret of the same name is created again. A reference with
// another UID is a 409, a missing Secret a 404, a Node (served by neither
// here) a 404 as for one that does not exist.
func TestKubectlTokenBoundToSecret(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	kubectl := s.MustKubectl
	kubectl("", "create", "serviceaccount", "robot")
	kubectl("", "create", "secret", "generic", "s", "--from-literal=a=b")
	uid := kubectl("", "get", "secret", "s", "-o", "jsonpath={.metadata.uid}")
	whoami := func(tok string) int {
		t.Helper()
		code, body, err := s.Do(http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", tok,
			strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusCreated && !strings.Contains(string(body), `"username":"system:serviceaccount:default:robot"`) {
			t.Errorf("SelfSubjectReview with the bound token: %s", body)
		}
		return code
	}

	tok := strings.TrimSpace(kubectl("", "create", "token", "robot", "--bound-object-kind", "Secret", "--bound-object-name", "s"))
	claims := decodeClaims(t, tok)
	if sec := claims.Kubernetes.Secret; sec == nil || sec.Name != "s" || sec.UID != uid {
		t.Errorf("claims %+v: want kubernetes.io.secret {name: s, uid: %s}", claims.Kubernetes, uid)
	}
	if code := whoami(tok); code != http.StatusCreated {
		t.Fatalf("the bound token while its Secret exists: %d, want 201", code)
	}

	if _, stderr, err := s.Kubectl("create", "token", "robot", "--bound-object-kind", "Secret", "--bound-object-name", "s", "--bound-object-uid", "0000"); err == nil ||
		!strings.Contains(stderr, `Operation cannot be fulfilled on Secret "s": the UID in the bound object reference (0000) does not match the UID in record. The object might have been deleted and then recreated`) {
		t.Errorf("kubectl create token bound to a Secret with another UID: %v\n%s", err, stderr)
	}
	for _, c := range []struct{ kind, name, want string }{
		{"Secret", "ghost", `secrets "ghost" not found`},
		{"Node", "n1", `nodes "n1" not found`},
	} {
		if _, stderr, err := s.Kubectl("create", "token", "robot", "--bound-object-kind", c.kind, "--bound-object-name", c.name); err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("kubectl create token bound to %s %s: %v\n%s; want %s", c.kind, c.name, err, stderr, c.want)
		}
	}

	kubectl("", "delete", "secret", "s")
	if code := whoami(tok); code != http.StatusUnauthorized {
		t.Errorf("the bound token once its Secret is deleted: %d, want 401", code)
	}
	kubectl("", "create", "secret", "generic", "s", "--from-literal=a=b")
	if code := whoami(tok); code != http.StatusUnauthorized {
		t.Errorf("the bound token once its Secret is created again: %d, want 401", code)
	}
	fresh := strings.TrimSpace(kubectl("", "create", "token", "robot", "--bound-object-kind", "Secret", "--bound-object-name", "s", "--duration", time.Hour.String()))
	if code := whoami(fresh); code != http.StatusCreated {
		t.Errorf("a token bound to the new Secret: %d, want 201", code)
	}
}
