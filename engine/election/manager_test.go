package election_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/election"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// thingKind registers a namespaced kind thingN.test.setpoint.dev and
// returns it.
func thingKind(t *testing.T, svc *engine.Service, n int) controller.Kind {
	t.Helper()
	plural := fmt.Sprintf("things%d", n)
	crd := &unstructured.Unstructured{}
	y := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[1]s.test.setpoint.dev}
spec:
  group: test.setpoint.dev
  scope: Namespaced
  names: {plural: %[1]s, singular: thing%[2]d, kind: Thing%[2]d}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, plural, n)
	if err := yaml.Unmarshal([]byte(y), &crd.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(context.Background(), engine.CRDResource, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return controller.Kind{Resource: schema.GroupVersionResource{Group: "test.setpoint.dev", Version: "v1", Resource: plural}, Kind: fmt.Sprintf("Thing%d", n), Namespaced: true}
}

func newThingController(t *testing.T, svc *engine.Service, name string, kind controller.Kind) *controller.Controller {
	t.Helper()
	c, err := controller.New(controller.Options{
		Name: name, Client: svc, For: kind, Logger: quietLogger(),
		Reconciler: controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			return &abi.ReconcileResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// managerReplica is a replica's controller manager, electing each
// controller over its own Lease.
type managerReplica struct {
	m    *controller.Manager
	stop func()
}

func runManager(t *testing.T, r *replica, identity string) *managerReplica {
	t.Helper()
	long := func(o election.Options) election.Options {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 20*time.Second, 10*time.Second, 50*time.Millisecond
		return o
	}
	ls := newLeases(t, r, identity, long)
	m := controller.NewManager(controller.ManagerOptions{Logger: quietLogger(), Electors: ls.Electors})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Manager.Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return &managerReplica{m: m, stop: stop}
}

func leading(m *controller.Manager, want ...string) func() bool {
	return func() bool { return slices.Equal(m.Leading(), want) }
}

// TestControllersSpread: two replicas' managers, each controller over its
// own Lease. Controllers a replica wanted first stay with it, those the
// other wanted first stay with the other, so both replicas reconcile at
// once, each controller on one; when one replica stops, it releases its
// leases and the other takes its controllers over at once (the leases last
// 20 s).
func TestControllersSpread(t *testing.T) {
	rs := newReplicas(t, 2)
	var kinds []controller.Kind
	for n := range 4 {
		kinds = append(kinds, thingKind(t, rs[0].svc, n))
	}
	ctl := func(r *replica, n int) *controller.Controller {
		return newThingController(t, r.svc, fmt.Sprintf("c%d", n), kinds[n])
	}
	a := runManager(t, rs[0], "replica-a")
	a.m.Put(ctl(rs[0], 0))
	a.m.Put(ctl(rs[0], 1))
	eventually(t, 5*time.Second, "a leads c0 and c1", leading(a.m, "c0", "c1"))

	eventually(t, 5*time.Second, "replica b serves the kinds", func() bool {
		_, ok := rs[1].svc.Resource(kinds[3].Resource)
		return ok
	})
	b := runManager(t, rs[1], "replica-b")
	for n := range 4 {
		b.m.Put(ctl(rs[1], n))
	}
	eventually(t, 5*time.Second, "b leads c2 and c3", leading(b.m, "c2", "c3"))
	a.m.Put(ctl(rs[0], 2))
	a.m.Put(ctl(rs[0], 3))
	time.Sleep(300 * time.Millisecond) // six retry periods
	if got, got2 := a.m.Leading(), b.m.Leading(); !slices.Equal(got, []string{"c0", "c1"}) || !slices.Equal(got2, []string{"c2", "c3"}) {
		t.Fatalf("a leads %v, b leads %v; want [c0 c1] and [c2 c3]", got, got2)
	}
	for n, want := range []string{"replica-a", "replica-a", "replica-b", "replica-b"} {
		l := getLease(t, rs[0], fmt.Sprintf("setpoint-c%d", n))
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != want {
			t.Errorf("lease setpoint-c%d held by %q, want %q", n, h, want)
		}
	}

	start := time.Now()
	b.stop()
	eventually(t, 5*time.Second, "a takes over c2 and c3", leading(a.m, "c0", "c1", "c2", "c3"))
	t.Logf("a took b's controllers over %v after b stopped", time.Since(start).Round(time.Millisecond))
}
