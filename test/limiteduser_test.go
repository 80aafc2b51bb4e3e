package test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// limitedUser is a user outside system:masters bound to cluster-admin:
// the in-flight limits apply to its requests, as they do not to the
// admin's (system:masters is exempt, as in kube-apiserver's priority and
// fairness).
const limitedUser = "limited"

// limitedHeader binds limitedUser to cluster-admin and returns the header
// with which the admin acts as that user (impersonation), once RBAC
// allows it.
func limitedHeader(t testing.TB, s *testserver.Server) http.Header {
	t.Helper()
	binding := fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"%s-cluster-admin"},
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},
"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":%q}]}`, limitedUser, limitedUser)
	if code, body, err := s.Do("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", s.Token, strings.NewReader(binding)); err != nil || code != http.StatusCreated {
		t.Fatalf("bind %s to cluster-admin: %d %s %v", limitedUser, code, body, err)
	}
	h := http.Header{"Impersonate-User": {limitedUser}}
	testsupport.Poll(t, 15*time.Second, limitedUser+" may list namespaces", func() (bool, string) {
		code, b, err := s.DoWith("GET", "/api/v1/namespaces", s.Token, nil, testserver.DoOptions{Header: h, Timeout: 10 * time.Second})
		if err != nil && code == 0 {
			return false, err.Error()
		}
		return code == http.StatusOK, fmt.Sprintf("%d %.200s", code, b)
	})
	return h
}
