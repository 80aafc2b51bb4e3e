package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestReplicasStartTogether starts three servers at once on one empty etcd
// prefix. They race to create the Plugin kind's CRD; every one of them must
// serve Plugins and keep running, the losers included.
func TestReplicasStartTogether(t *testing.T) {
	e := etcdtest.Start(t, etcdtest.Options{})
	args := []string{"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/together"}
	t.Run("replicas", func(t *testing.T) {
		for i := range 3 {
			t.Run(fmt.Sprintf("replica-%d", i), func(t *testing.T) {
				t.Parallel()
				s := testserver.Start(t, testserver.Options{Args: args})
				if out, errOut, err := s.Kubectl("get", "plugins"); err != nil {
					t.Fatalf("kubectl get plugins: %v\n%s%s", err, out, errOut)
				}
				if err := s.Wait(2 * time.Second); err == nil || !strings.Contains(err.Error(), "still running") {
					t.Fatalf("the server exited: %v", err)
				}
			})
		}
	})
}
