package test

import (
	"context"
	"fmt"
	"io"
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
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", s.URL+"/api/v1/namespaces", nil)
		if err != nil {
			return false, err.Error()
		}
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set("Impersonate-User", limitedUser)
		c := s.HTTPClient()
		defer c.CloseIdleConnections()
		resp, err := c.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %.200s", resp.StatusCode, b)
	})
	return h
}
