package test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestAccessReviews asks the built server whether others may act
// (SubjectAccessReview, LocalSubjectAccessReview, with kubectl and
// client-go) and reads /metrics and the profiles, nonResourceURLs the admin
// is authorized for as a member of system:masters.
func TestAccessReviews(t *testing.T) {
	s := testserver.Start(t, testserver.Options{Args: []string{"--profiling"}})
	const sar = `apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: %s
  groups: [%s]
  resourceAttributes: {verb: delete, resource: namespaces}
`
	for _, tt := range []struct{ user, group, want string }{
		{"bob", "system:authenticated", "allowed: false"},
		{"root", user.SystemPrivilegedGroup, "allowed: true"},
	} {
		stdout, stderr, err := s.KubectlInput(fmt.Sprintf(sar, tt.user, tt.group), "create", "-f", "-", "-o", "yaml")
		if err != nil || !strings.Contains(stdout, tt.want) {
			t.Errorf("kubectl create SubjectAccessReview for %s in %s: %v\n%s%s; want %q", tt.user, tt.group, err, stdout, stderr, tt.want)
		}
	}
	cs, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	review := func(groups ...string) authorizationv1.SubjectAccessReviewSpec {
		return authorizationv1.SubjectAccessReviewSpec{User: "bob", Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "events", Namespace: "default"}}
	}
	for _, tt := range []struct {
		groups  []string
		allowed bool
	}{
		{[]string{user.AllAuthenticated}, false},
		{[]string{user.SystemPrivilegedGroup}, true},
	} {
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: review(tt.groups...)}, metav1.CreateOptions{})
		if err != nil || got.Status.Allowed != tt.allowed {
			t.Errorf("SubjectAccessReview of bob in %v: %+v %v; want allowed %v", tt.groups, got, err, tt.allowed)
		}
		local, err := cs.AuthorizationV1().LocalSubjectAccessReviews("default").Create(ctx,
			&authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Spec: review(tt.groups...)}, metav1.CreateOptions{})
		if err != nil || local.Status.Allowed != tt.allowed {
			t.Errorf("LocalSubjectAccessReview of bob in %v: %+v %v; want allowed %v", tt.groups, local, err, tt.allowed)
		}
	}
	for _, path := range []string{"/metrics", "/debug/pprof/heap?debug=1"} {
		if code, body, err := s.Do(http.MethodGet, path, s.Token, nil); err != nil || code != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s as the admin: %d %v", path, code, err)
		}
		if code, _, err := s.Do(http.MethodGet, path, "", nil); err != nil || code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d %v; want 401", path, code, err)
		}
	}
}
