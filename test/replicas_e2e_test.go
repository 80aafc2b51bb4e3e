package test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// replicasSubset are end-to-end tests that also run against three replicas
// on etcd, each test's requests spread over them (testserver.ReplicasEnv):
// CRUD, watches and a shared informer through client-go, server-side apply
// through kubectl, finalizers and garbage collection, and an admission
// plugin installed and met through kubectl. `make test-replicas` runs a
// longer list (REPLICAS_TESTS in the Makefile).
var replicasSubset = []string{
	"TestClientGo",
	"TestServerSideApplyKubectl",
	"TestAPIFinalizersAndGarbageCollection",
	"TestMutatingPluginCannotSetSystemFields",
}

// TestReplicasE2E runs replicasSubset again, in a child process of this
// test binary, against three replicas on etcd: they pass there as they do
// on one server on Badger.
func TestReplicasE2E(t *testing.T) {
	if os.Getenv(testserver.ReplicasEnv) != "" {
		t.Skip("already running against replicas")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^("+strings.Join(replicasSubset, "|")+")$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), testserver.ReplicasEnv+"=3")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	passed := regexp.MustCompile(`(?m)^--- PASS: (\S+) \(([0-9.]+s)\)$`).FindAllStringSubmatch(string(out), -1)
	var names []string
	for _, p := range passed {
		names = append(names, p[1]+" "+p[2])
	}
	t.Logf("against 3 replicas on etcd: %s", strings.Join(names, ", "))
	if err != nil || len(passed) != len(replicasSubset) {
		t.Fatalf("the subset against 3 replicas: %v; %d of %d passed:\n%s", err, len(passed), len(replicasSubset), out)
	}
}
