package election_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/apiserver"
)

// TestKubectlShowsLeases runs the real kubectl against a replica's API: a
// replica leading a controller shows as the holder of its Lease in `kubectl
// get leases -A` and `kubectl describe lease`.
func TestKubectlShowsLeases(t *testing.T) {
	if _, err := os.Stat("/usr/bin/kubectl"); err != nil {
		t.Skip("no /usr/bin/kubectl")
	}
	r := newReplicas(t, 1)[0]
	api, err := apiserver.New(apiserver.Options{Engine: r.svc, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := newLeases(t, r, "replica-0", short).Elector("widgets").Lead(ctx); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: %s\ncontexts:\n- name: s\n  context:\n    cluster: s\n    user: u\n    namespace: default\nusers:\n- name: u\n  user: {}\ncurrent-context: s\n", hs.URL)
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"get", "leases", "-A"}, []string{"NAMESPACE", "HOLDER", "default", "setpoint-widgets", "replica-0"}},
		{[]string{"describe", "lease", "setpoint-widgets"}, []string{"Holder Identity:", "replica-0", "Lease Duration Seconds:", "Renew Time:"}},
		{[]string{"get", "lease", "setpoint-widgets", "-o", "jsonpath={.spec.holderIdentity} {.spec.leaseTransitions}"}, []string{"replica-0 0"}},
		{[]string{"api-resources", "--api-group", "coordination.k8s.io"}, []string{"leases", "coordination.k8s.io/v1", "true", "Lease"}},
		// Client-side apply of an existing Lease sends a strategic merge
		// patch, which kube-apiserver takes for its Lease type.
		{[]string{"apply", "-f", leaseFile(t, dir, "first")}, []string{"lease.coordination.k8s.io/by-hand created"}},
		{[]string{"apply", "-f", leaseFile(t, dir, "second")}, []string{"lease.coordination.k8s.io/by-hand configured"}},
		{[]string{"patch", "lease", "by-hand", "--type", "strategic", "-p", `{"spec":{"leaseTransitions":3}}`}, []string{"lease.coordination.k8s.io/by-hand patched"}},
		{[]string{"get", "lease", "by-hand", "-o", "jsonpath={.spec.holderIdentity} {.spec.leaseTransitions}"}, []string{"second 3"}},
	} {
		out, err := exec.Command("/usr/bin/kubectl", append([]string{"--kubeconfig", kc, "--cache-dir", filepath.Join(dir, "cache")}, tc.args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(tc.args, " "), err, out)
		}
		t.Logf("kubectl %s:\n%s", strings.Join(tc.args, " "), out)
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("kubectl %s: want %q in:\n%s", strings.Join(tc.args, " "), w, out)
			}
		}
	}
}

// leaseFile writes a Lease named by-hand held by holder into dir and
// returns its path.
func leaseFile(t *testing.T, dir, holder string) string {
	t.Helper()
	p := filepath.Join(dir, holder+".yaml")
	y := "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: by-hand\nspec:\n  holderIdentity: " + holder + "\n"
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
