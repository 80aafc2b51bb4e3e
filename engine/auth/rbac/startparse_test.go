package rbac

import (
	"context"
	"os"
	"os/exec"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/election"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// TestFirstStartParsesNoSchema: the server's own writes on a first start
// (the default RBAC roles, the aggregated roles' rules, a system CRD) are
// built in their kinds' stored shape, so they parse neither client-go's nor
// apiextensions-apiserver's schema (some 150 ms of CPU and 15 MiB of RSS).
// The parse is once per process, so the check runs in a process of its own.
func TestFirstStartParsesNoSchema(t *testing.T) {
	if os.Getenv("SETPOINT_TEST_SCHEMA_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestFirstStartParsesNoSchema$", "-test.count", "1")
		cmd.Env = append(os.Environ(), "SETPOINT_TEST_SCHEMA_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	s := serve(t) // the default roles, then the aggregation of admin, edit and view
	eventually(t, "the admin role's aggregated rules", func() bool {
		u, err := s.svc.Get(context.Background(), kinds.ClusterRoleResource, "", "admin", metav1.GetOptions{})
		if err != nil {
			return false
		}
		rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
		return len(rules) > 0
	})
	if err := election.EnsureKind(context.Background(), s.svc); err != nil {
		t.Fatal(err)
	}
	if n := kinds.SchemaParses(); n != 0 {
		t.Fatalf("a first start parsed %d of the built-in APIs' schemas, want none", n)
	}
}
