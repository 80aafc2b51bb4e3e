package plugins

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestReservedGroup: through the plugins' admission chain, a user's CRD in
// the group setpoint.dev is refused with a message saying why, while the
// Plugin kind's own CRD and CRDs of other groups are created.
func TestReservedGroup(t *testing.T) {
	ctx := context.Background()
	svc := newAdmittedWriteService(t, openAdmitter())
	for _, c := range []testsupport.CRD{
		{Group: Group, Kind: "Module", Scope: "Cluster"},
		{Group: Group, Kind: "Doodad"},
	} {
		_, err := svc.Create(ctx, kinds.CRDResource, c.Unstructured(), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.group") || !strings.Contains(err.Error(), "reserved for the server's own kinds") {
			t.Errorf("CRD %s in the reserved group: %v, want Invalid saying the group is reserved", c.Name(), err)
		}
	}
	if err := EnsureKind(ctx, svc); err != nil {
		t.Fatalf("the Plugin kind's CRD: %v", err)
	}
	createCRDs(t, svc, testsupport.CRD{Group: "doodads.example.com", Kind: "Doodad"})
}

// TestModulesAreNoResource: the engine alone reserves no group, and CRDs
// whose resources are shaped like keys modules were once kept under serve
// none of the stored modules: modules live among the private keys.
func TestModulesAreNoResource(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	wasm := randomModule(2*moduleChunkSize, 5)
	if _, err := NewModules(db).Put(ctx, digestOf(wasm), wasm); err != nil {
		t.Fatal(err)
	}
	for _, c := range []testsupport.CRD{
		{Group: Group, Kind: "Module", Scope: "Cluster"},
		{Group: Group, Kind: "ModuleChunk", Scope: "Cluster"},
	} {
		createCRDs(t, svc, c)
		gvr := schema.GroupVersionResource{Group: Group, Version: "v1", Resource: strings.ToLower(c.Kind) + "s"}
		testsupport.Poll(t, 10*time.Second, c.Name()+" served", func() (bool, string) {
			l, err := svc.List(ctx, gvr, "", metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			if len(l.Items) != 0 {
				t.Fatalf("%s lists %d objects, want none of the stored modules", gvr.Resource, len(l.Items))
			}
			return true, ""
		})
	}
}
