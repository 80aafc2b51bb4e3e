package test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// rbacManifest is RBAC as projects ship it: a ServiceAccount's Role and
// RoleBinding, a ClusterRole aggregated into view, and a ClusterRoleBinding,
// with subjects that leave apiGroup to its default.
const rbacManifest = `
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: widget-editor
  namespace: shop
rules:
- apiGroups: ["example.setpoint.dev"]
  resources: ["widgets", "widgets/status"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: widget-editor
  namespace: shop
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: widget-editor
subjects:
- kind: ServiceAccount
  name: deployer
- kind: User
  name: jane
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widget-viewer
  labels:
    rbac.authorization.k8s.io/aggregate-to-view: "true"
rules:
- apiGroups: ["example.setpoint.dev"]
  resources: ["widgets"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: auditors
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: view
subjects:
- kind: Group
  name: auditors
`

// TestRBACKubectl manages RBAC with kubectl as the admin: the default
// roles are there, create/get/describe/apply/auth reconcile of the four
// kinds work, aggregation reaches view, what Kubernetes refuses is
// refused, and a Plugin's permissions show as its ClusterRole.
func TestRBACKubectl(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := s.Kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
		return stdout
	}
	out := run("get", "clusterroles")
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery", "system:public-info-viewer"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s`).MatchString(out) {
			t.Errorf("kubectl get clusterroles lacks %s:\n%s", name, out)
		}
	}
	if out := run("get", "clusterrolebinding", "cluster-admin", "-o", "jsonpath={.subjects[0].name}"); out != "system:masters" {
		t.Errorf("cluster-admin is bound to %q, want system:masters", out)
	}

	// The imperative verbs.
	run("create", "namespace", "team")
	run("create", "role", "pod-reader", "-n", "team", "--verb=get,list", "--resource=events", "--resource-name=w1")
	run("create", "clusterrole", "metrics-reader", "--verb=get", "--non-resource-url=/metrics")
	run("create", "rolebinding", "pod-readers", "-n", "team", "--role=pod-reader", "--user=ann", "--group=devs", "--serviceaccount=team:bot")
	run("create", "clusterrolebinding", "metrics-readers", "--clusterrole=metrics-reader", "--user=prom")
	if out := run("get", "role", "pod-reader", "-n", "team", "-o", "jsonpath={.rules[0].resourceNames[0]}"); out != "w1" {
		t.Errorf("role pod-reader resourceNames: %q", out)
	}
	out = run("get", "rolebindings", "-n", "team")
	if !regexp.MustCompile(`(?m)^pod-readers\s+Role/pod-reader\s`).MatchString(out) {
		t.Errorf("kubectl get rolebindings:\n%s", out)
	}
	out = run("describe", "rolebinding", "pod-readers", "-n", "team")
	for _, want := range []string{"Role:", "pod-reader", "User", "ann", "Group", "devs", "ServiceAccount", "bot"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe rolebinding lacks %q:\n%s", want, out)
		}
	}
	out = run("describe", "clusterrole", "metrics-reader")
	if !regexp.MustCompile(`\[/metrics\]\s+\[\]\s+\[get\]`).MatchString(out) {
		t.Errorf("kubectl describe clusterrole metrics-reader:\n%s", out)
	}

	// An existing manifest applies, and applies again.
	if stdout, stderr, err := s.KubectlInput(rbacManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, stdout, stderr)
	}
	// (Subjects are an atomic list: as in Kubernetes, a binding whose
	// subjects leave apiGroup to its default is patched again, unchanged.)
	if stdout, stderr, err := s.KubectlInput(rbacManifest, "apply", "-f", "-"); err != nil ||
		!strings.Contains(stdout, "role.rbac.authorization.k8s.io/widget-editor unchanged") ||
		!strings.Contains(stdout, "clusterrole.rbac.authorization.k8s.io/widget-viewer unchanged") {
		t.Fatalf("kubectl apply again: %v\n%s%s", err, stdout, stderr)
	}
	if stdout, stderr, err := s.KubectlInput(strings.ReplaceAll(rbacManifest, "jane", "joe"), "apply", "-f", "-", "--dry-run=server"); err != nil ||
		!strings.Contains(stdout, "rolebinding.rbac.authorization.k8s.io/widget-editor configured (server dry run)") {
		t.Fatalf("kubectl apply --dry-run=server: %v\n%s%s", err, stdout, stderr)
	}
	if out := run("get", "rolebinding", "widget-editor", "-n", "shop", "-o", "jsonpath={.subjects[1].apiGroup}"); out != "rbac.authorization.k8s.io" {
		t.Errorf("a User subject's apiGroup defaults to rbac.authorization.k8s.io, got %q", out)
	}
	// kubectl auth reconcile reads, compares and writes them too.
	if stdout, stderr, err := s.KubectlInput(rbacManifest, "auth", "reconcile", "-f", "-"); err != nil {
		t.Fatalf("kubectl auth reconcile: %v\n%s%s", err, stdout, stderr)
	}

	// view aggregates widget-viewer's rule (each kubectl run is the wait).
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := run("get", "clusterrole", "view", "-o", "jsonpath={.rules[*].apiGroups}")
		if strings.Contains(out, "example.setpoint.dev") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("view never aggregated widget-viewer: %s", run("get", "clusterrole", "view", "-o", "yaml"))
		}
	}

	// Kubernetes' refusals.
	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"roleRef is immutable", `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: auditors
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: edit
subjects:
- kind: Group
  name: auditors
`, []string{"apply", "-f", "-"}, "cannot change roleRef"},
		{"nonResourceURLs in a Role", `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: bad, namespace: team}
rules: [{nonResourceURLs: ["/metrics"], verbs: ["get"]}]
`, []string{"apply", "-f", "-"}, "namespaced rules cannot apply to non-resource URLs"},
		{"rule without verbs", `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: bad}
rules: [{apiGroups: [""], resources: ["namespaces"]}]
`, []string{"apply", "-f", "-"}, "verbs must contain at least one value"},
		{"ClusterRoleBinding to a Role", `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: bad}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
`, []string{"apply", "-f", "-"}, `Unsupported value: "Role"`},
	} {
		stdout, stderr, err := s.KubectlInput(tc.stdin, tc.args...)
		if err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: kubectl %s: %v\n%s%s; want a refusal with %q", tc.name, strings.Join(tc.args, " "), err, stdout, stderr, tc.want)
		}
	}

	// A Plugin's permissions are a ClusterRole bound to its user, gone
	// with the Plugin.
	ok(t, s, "apply", "-f", filepath.Join("..", "examples", "widget", "crd.yaml"), "-f", filepath.Join("..", "examples", "widget", "provision-crd.yaml"))
	ok(t, s, "plugin", "install", "widget", "--wasm", wasmModule(t, "widget-plugin"), "--reconcile", "widgets", "--owns", "widgetprovisions")
	out = run("describe", "clusterrole", "setpoint:plugin:widget")
	for _, want := range []string{"widgets.example.setpoint.dev", "widgets.example.setpoint.dev/status", "widgetprovisions.example.setpoint.dev"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe clusterrole setpoint:plugin:widget lacks %s:\n%s", want, out)
		}
	}
	if out := run("get", "clusterrolebinding", "setpoint:plugin:widget", "-o", "jsonpath={.subjects[0].kind}/{.subjects[0].name}"); out != "User/system:setpoint:plugin:widget" {
		t.Errorf("setpoint:plugin:widget is bound to %q", out)
	}
	run("delete", "plugin", "widget")
	for deadline := time.Now().Add(20 * time.Second); ; {
		_, stderr, err := s.Kubectl("get", "clusterrole", "setpoint:plugin:widget")
		if err != nil && strings.Contains(stderr, "NotFound") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ClusterRole of a deleted plugin is still there: %v %s", err, stderr)
		}
	}

	// Deletes work like any other kind's.
	run("delete", "rolebinding", "pod-readers", "-n", "team")
	run("delete", "clusterrolebinding", "metrics-readers")
	if _, stderr, err := s.Kubectl("get", "rolebinding", "pod-readers", "-n", "team"); err == nil || !strings.Contains(stderr, "NotFound") {
		t.Errorf("deleted rolebinding still there: %v %s", err, stderr)
	}
}
