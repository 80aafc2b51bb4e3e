package test

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestKubectlSystemNamespaces: a new server has the namespaces
// kube-apiserver v1.34 starts with, and kubectl sees what it sees there:
// default, kube-system and kube-public may not be deleted (the same 403,
// dry run or not), kube-node-lease may, and kube-system takes objects
// (kubectl -n kube-system, leader election leases).
func TestKubectlSystemNamespaces(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	kubectl := s.MustKubectl
	if got := kubectl("", "get", "ns", "-o", "name"); got != "namespace/default\nnamespace/kube-node-lease\nnamespace/kube-public\nnamespace/kube-system\n" {
		t.Errorf("kubectl get ns -o name on a new server:\n%s", got)
	}
	for _, name := range []string{"default", "kube-system", "kube-public"} {
		for _, dry := range []string{"--dry-run=none", "--dry-run=server"} {
			_, stderr, err := s.Kubectl("delete", "ns", name, dry)
			if want := `Error from server (Forbidden): namespaces "` + name + `" is forbidden: this namespace may not be deleted`; err == nil || strings.TrimSpace(stderr) != want {
				t.Errorf("kubectl delete ns %s %s: err %v, stderr %q; want %q", name, dry, err, stderr, want)
			}
		}
	}
	kubectl("", "create", "configmap", "c", "-n", "kube-system")
	kubectl("apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: my-controller, namespace: kube-system}\nspec: {holderIdentity: a}\n", "apply", "-f", "-")
	if got := kubectl("", "delete", "ns", "kube-node-lease", "--wait=false"); got != "namespace \"kube-node-lease\" deleted\n" {
		t.Errorf("kubectl delete ns kube-node-lease: %q", got)
	}
}
