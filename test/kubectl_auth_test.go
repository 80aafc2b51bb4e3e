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
	if out := run("auth", "can-i", "--list"); !regexp.MustCompile(`(?m)^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]$`).MatchString(out) {
		t.Errorf("kubectl auth can-i --list:\n%s", out)
	}
	if out := run("api-resources", "--api-group", "authorization.k8s.io"); !strings.Contains(out, "selfsubjectaccessreviews") {
		t.Errorf("kubectl api-resources --api-group authorization.k8s.io:\n%s", out)
	}
	// Acting as someone else is refused, not answered as the admin (kubectl
	// auth whoami words any 403 as the API being off).
	if stdout, stderr, err := s.Kubectl("auth", "whoami", "--as=bob"); err == nil || strings.Contains(stdout, "setpoint-admin") {
		t.Errorf("kubectl auth whoami --as=bob: %v\n%s%s; want a refusal", err, stdout, stderr)
	}
	for _, args := range [][]string{
		{"auth", "can-i", "create", "namespaces", "--as=bob"},
		{"get", "namespaces", "--as-group=devs", "--as=bob"},
	} {
		stdout, stderr, err := s.Kubectl(args...)
		if err == nil || !strings.Contains(stderr, `cannot impersonate resource "users"`) || strings.TrimSpace(stdout) == "yes" {
			t.Errorf("kubectl %s: %v\n%s%s; want a refused impersonation", strings.Join(args, " "), err, stdout, stderr)
		}
	}
}
