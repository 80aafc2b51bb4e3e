package election_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
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
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/test/testsupport"
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
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, plural, n)
	if err := yaml.Unmarshal([]byte(y), &crd.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(context.Background(), kinds.CRDResource, crd, metav1.CreateOptions{}); err != nil {
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
	testsupport.Eventually(t, 5*time.Second, "a leads c0 and c1", leading(a.m, "c0", "c1"))

	testsupport.Eventually(t, 5*time.Second, "replica b serves the kinds", func() bool {
		_, ok := rs[1].svc.Resource(kinds[3].Resource)
		return ok
	})
	b := runManager(t, rs[1], "replica-b")
	for n := range 4 {
		b.m.Put(ctl(rs[1], n))
	}
	testsupport.Eventually(t, 5*time.Second, "b leads c2 and c3", leading(b.m, "c2", "c3"))
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
	testsupport.Eventually(t, 5*time.Second, "a takes over c2 and c3", leading(a.m, "c0", "c1", "c2", "c3"))
	t.Logf("a took b's controllers over %v after b stopped", time.Since(start).Round(time.Millisecond))
}

// TestControllerFailoverNoOverlap runs one controller on two replicas'
// managers, each leader cut off from the store in turn: the controller's
// reconciles (which honour their context) never run on both replicas at
// once, and both replicas lead in turn.
func TestControllerFailoverNoOverlap(t *testing.T) {
	rs := newReplicas(t, 2)
	kind := thingKind(t, rs[0].svc, 0)
	for i := range 3 {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "test.setpoint.dev/v1", "kind": "Thing0",
			"metadata": map[string]any{"name": fmt.Sprintf("t%d", i), "namespace": "default"},
		}}
		if _, err := rs[0].svc.Create(context.Background(), kind.Resource, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Eventually(t, 5*time.Second, "replica 1 serves the kind", func() bool {
		_, ok := rs[1].svc.Resource(kind.Resource)
		return ok
	})
	var overlaps atomic.Int32
	var active [2]atomic.Int32 // reconciles running on each replica
	var reconciles [2]atomic.Int32
	managers := make([]*controller.Manager, 2)
	for i, r := range rs {
		ls := newLeases(t, r, fmt.Sprintf("replica-%d", i), short)
		m := controller.NewManager(controller.ManagerOptions{Logger: quietLogger(), Electors: ls.Electors})
		c, err := controller.New(controller.Options{
			Name: "c", Client: r.svc, For: kind, Logger: quietLogger(), Workers: 2,
			Reconciler: controller.ReconcilerFunc(func(ctx context.Context, _ *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
				active[i].Add(1)
				defer active[i].Add(-1)
				if active[1-i].Load() > 0 {
					overlaps.Add(1)
				}
				reconciles[i].Add(1)
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
				return &abi.ReconcileResponse{RequeueAfter: 10 * time.Millisecond}, nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		m.Put(c)
		managers[i] = m
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Manager.Run: %v", err)
			}
		})
	}
	leader := func() int {
		for i, m := range managers {
			if slices.Equal(m.Leading(), []string{"c"}) {
				return i
			}
		}
		return -1
	}
	var led [2]bool
	for range 3 {
		var l int
		testsupport.Eventually(t, 5*time.Second, "a replica leads", func() bool { l = leader(); return l >= 0 })
		led[l] = true
		n := reconciles[l].Load()
		testsupport.Eventually(t, 5*time.Second, "the leader reconciles", func() bool { return reconciles[l].Load() > n+5 })
		rs[l].store.mode.Store(stalled)
		testsupport.Eventually(t, 5*time.Second, "the other replica takes over", func() bool { return leader() == 1-l })
		rs[l].store.mode.Store(connected)
	}
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("reconciles ran on both replicas at once %d times", n)
	}
	if !led[0] || !led[1] {
		t.Fatalf("leadership never moved: replica 0 led %v, replica 1 led %v", led[0], led[1])
	}
	t.Logf("reconciles: replica 0 %d, replica 1 %d", reconciles[0].Load(), reconciles[1].Load())
}
