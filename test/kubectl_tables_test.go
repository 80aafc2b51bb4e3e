package test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// tablesManifest has one object of each built-in kind whose table the
// real kubectl prints in TestKubectlTables.
const tablesManifest = `
apiVersion: v1
kind: Namespace
metadata:
  name: tables
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: robot
  namespace: tables
secrets:
- name: robot-token
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: reader
  namespace: tables
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: viewers
  namespace: tables
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: view
subjects:
- kind: User
  name: ann
- kind: Group
  name: team
- kind: User
  name: bob
- kind: ServiceAccount
  name: robot
  namespace: tables
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: readers
  namespace: tables
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: reader
subjects:
- kind: ServiceAccount
  name: ci
  namespace: build
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: tables-viewers
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: view
subjects:
- kind: Group
  name: auditors
- kind: ServiceAccount
  name: robot
  namespace: tables
`

// TestKubectlTables: the real kubectl prints the built-in kinds' tables as
// it prints kube-apiserver's: a binding's ROLE as kind/name and, with -o
// wide, its users, groups and service accounts (namespace/name); roles
// with their creation time; service accounts with their secrets' count.
// One server for all of it.
func TestKubectlTables(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	if stdout, stderr, err := s.KubectlInput(tablesManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, stdout, stderr)
	}
	age := `\d+[smhdy]\S*`
	for _, tt := range []struct {
		args   []string
		header string
		rows   []string // regular expressions, one a line, in order
	}{
		{[]string{"get", "rolebindings", "-n", "tables", "-o", "wide"},
			"NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS",
			[]string{`readers +Role/reader +` + age + ` +build/ci`, `viewers +ClusterRole/view +` + age + ` +ann, bob +team +tables/robot`}},
		// Pages of one binding each make the same table.
		{[]string{"get", "rolebindings", "-n", "tables", "-o", "wide", "--chunk-size=1"},
			"NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS",
			[]string{`readers +Role/reader +` + age + ` +build/ci`, `viewers +ClusterRole/view +` + age + ` +ann, bob +team +tables/robot`}},
		{[]string{"get", "rolebindings", "-n", "tables"},
			"NAME ROLE AGE",
			[]string{`readers +Role/reader +` + age, `viewers +ClusterRole/view +` + age}},
		{[]string{"get", "clusterrolebindings", "tables-viewers"},
			"NAME ROLE AGE",
			[]string{`tables-viewers +ClusterRole/view +` + age}},
		{[]string{"get", "clusterrolebindings", "tables-viewers", "-o", "wide"},
			"NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS",
			[]string{`tables-viewers +ClusterRole/view +` + age + ` +auditors +tables/robot`}},
		{[]string{"get", "roles", "-n", "tables"},
			"NAME CREATED AT",
			[]string{`reader +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`}},
		{[]string{"get", "serviceaccounts", "robot", "-n", "tables"},
			"NAME SECRETS AGE",
			[]string{`robot +1 +` + age}},
		{[]string{"get", "namespaces", "tables"},
			"NAME STATUS AGE",
			[]string{`tables +Active +` + age}},
	} {
		cmd := strings.Join(tt.args, " ")
		out, errOut, err := s.Kubectl(tt.args...)
		if err != nil {
			t.Errorf("kubectl %s: %v\n%s%s", cmd, err, out, errOut)
			continue
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if got := strings.Join(strings.Fields(lines[0]), " "); got != tt.header {
			t.Errorf("kubectl %s: header %q, want %q\n%s", cmd, got, tt.header, out)
		}
		if len(lines)-1 != len(tt.rows) {
			t.Errorf("kubectl %s: %d rows, want %d\n%s", cmd, len(lines)-1, len(tt.rows), out)
			continue
		}
		for i, re := range tt.rows {
			if !regexp.MustCompile(`^` + re + `$`).MatchString(lines[i+1]) {
				t.Errorf("kubectl %s: row %q does not match %q", cmd, lines[i+1], re)
			}
		}
	}
}
