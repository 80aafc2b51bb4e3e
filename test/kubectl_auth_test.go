package test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestKubectlAuth runs kubectl's self-review commands against the built
// server: whoami, can-i for resources and non-resource URLs, and can-i
// --list, which tools ask before they act.
func TestKubectlAuth(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := s.Kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
		return stdout
	}
	if out := run("auth", "whoami"); !regexp.MustCompile(`(?m)^Username\s+setpoint-admin$`).MatchString(out) ||
		!strings.Contains(out, "system:masters") {
		t.Errorf("kubectl auth whoami:\n%s", out)
	}
	for _, args := range [][]string{
		{"auth", "can-i", "create", "namespaces"},
		{"auth", "can-i", "delete", "customresourcedefinitions"},
		{"auth", "can-i", "list", "events", "--all-namespaces"},
		{"auth", "can-i", "get", "/healthz"},
	} {
		if out := run(args...); strings.TrimSpace(out) != "yes" {
			t.Errorf("kubectl %s: %q, want yes", strings.Join(args, " "), out)
		}
	}
	// As kube-apiserver lists them for system:masters: the rules of the
	// group's binding to cluster-admin and of the default bindings of every
	// authenticated user (system:basic-user, system:discovery,
	// system:public-info-viewer), which kubectl sorts.
	if out := run("auth", "can-i", "--list"); out != canIListOfAdmin {
		t.Errorf("kubectl auth can-i --list:\n%s\nwant\n%s", out, canIListOfAdmin)
	}
	if out := run("api-resources", "--api-group", "authorization.k8s.io"); !strings.Contains(out, "selfsubjectaccessreviews") {
		t.Errorf("kubectl api-resources --api-group authorization.k8s.io:\n%s", out)
	}
	// The admin, in system:masters, may act as someone else, who is then
	// held to their own rights (none without a policy).
	if out := run("auth", "whoami", "--as=bob"); !regexp.MustCompile(`(?m)^Username\s+bob$`).MatchString(out) || strings.Contains(out, "system:masters") {
		t.Errorf("kubectl auth whoami --as=bob:\n%s", out)
	}
	if stdout, stderr, err := s.Kubectl("auth", "can-i", "create", "namespaces", "--as=bob"); err == nil || !strings.HasPrefix(strings.TrimSpace(stdout), "no") {
		t.Errorf("kubectl auth can-i create namespaces --as=bob: %v\n%s%s; want no", err, stdout, stderr)
	}
	if stdout, stderr, err := s.Kubectl("get", "namespaces", "--as-group=devs", "--as=bob"); err == nil || !strings.Contains(stderr, `User "bob" cannot list resource "namespaces"`) {
		t.Errorf("kubectl get namespaces --as=bob: %v\n%s%s; want bob's 403", err, stdout, stderr)
	}
}

// canIListOfAdmin is what kubectl auth can-i --list prints for a member of
// system:masters against kube-apiserver v1.34.
const canIListOfAdmin = `Resources                                       Non-Resource URLs   Resource Names   Verbs
*.*                                             []                  []               [*]
                                                [*]                 []               [*]
selfsubjectreviews.authentication.k8s.io        []                  []               [create]
selfsubjectaccessreviews.authorization.k8s.io   []                  []               [create]
selfsubjectrulesreviews.authorization.k8s.io    []                  []               [create]
                                                [/api/*]            []               [get]
                                                [/api]              []               [get]
                                                [/apis/*]           []               [get]
                                                [/apis]             []               [get]
                                                [/healthz]          []               [get]
                                                [/healthz]          []               [get]
                                                [/livez]            []               [get]
                                                [/livez]            []               [get]
                                                [/openapi/*]        []               [get]
                                                [/openapi]          []               [get]
                                                [/readyz]           []               [get]
                                                [/readyz]           []               [get]
                                                [/version/]         []               [get]
                                                [/version/]         []               [get]
                                                [/version]          []               [get]
                                                [/version]          []               [get]
`
