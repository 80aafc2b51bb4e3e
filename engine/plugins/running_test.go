package plugins

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// stuckHost serves plugins like servingHost, except that the reconcile of
// the plugin "first" blocks, ignoring cancellation, until release closes.
type stuckHost struct {
	servingHost
	entered, release chan struct{}
	once             sync.Once
}

func (h *stuckHost) Caller(name string) Caller {
	if name != "first" {
		return h.servingHost.Caller(name)
	}
	return stuckCaller{servingCaller: servingCaller{h: h.fakeHost, plugin: name}, h: h}
}

type stuckCaller struct {
	servingCaller
	h *stuckHost
}

func (c stuckCaller) Reconcile(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	c.h.once.Do(func() { close(c.h.entered) })
	<-c.h.release
	return &abi.ReconcileResponse{}, nil
}

// A Plugin whose reconcile controller has not started says so: phase
// Pending and Ready=False, naming the stopping controller it waits for,
// until it runs; then Loaded and Ready=True.
func TestPluginReportsControllerNotStarted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	db := openTestDB(t)
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for _, def := range []string{noteCRD, gizmoCRD} {
		crd := &unstructured.Unstructured{}
		if err := crd.UnmarshalJSON([]byte(def)); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Create(ctx, kinds.CRDResource, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h := &stuckHost{servingHost: servingHost{&fakeHost{current: map[string]string{}}}, entered: make(chan struct{}), release: make(chan struct{})}
	released := sync.OnceFunc(func() { close(h.release) })
	ctls := controller.NewManager(controller.ManagerOptions{Logger: quietLogger(), StopTimeout: 100 * time.Millisecond})
	modules := NewModules(db)
	m, err := New(Options{Service: svc, Modules: modules, Host: h, Logger: quietLogger(), Controllers: ctls, StatusInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = m.Run(ctx) })
	wg.Go(func() { _ = ctls.Run(ctx) })
	t.Cleanup(func() { released(); cancel(); wg.Wait() })
	waitServed(t, svc)

	wasm := []byte("exports:reconcile;")
	digest := digestOf(wasm)
	if _, err := modules.Put(ctx, digest, wasm); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"first", "policy"} {
		p := reconcilePlugin(name, digest)
		if name == "first" {
			if _, err := svc.Create(ctx, Resource, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Create(ctx, notes, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.setpoint.dev/v1", "kind": "Note",
				"metadata": map[string]any{"name": "n", "namespace": "default"}, "spec": map[string]any{"size": "small"},
			}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-h.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the first plugin never reconciled")
			}
			if err := svc.Delete(ctx, Resource, "", "first", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := svc.Create(ctx, Resource, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var msg string
	waitStatus(t, svc, "the controller not started", func(st map[string]any) bool {
		msg = conditionMessage(st, controller.ConditionReady)
		return st["phase"] == PhasePending && conditionStatus(st, controller.ConditionReady) == "False" &&
			conditionStatus(st, ConditionLoaded) == "True"
	})
	if !strings.Contains(msg, `waits for the controller "first", of the same kind, to stop`) {
		t.Errorf("Ready message %q does not say what the controller waits for", msg)
	}
	released()
	deadline := time.Now().Add(20 * time.Second)
	for {
		obj, err := svc.Get(ctx, Resource, "", "policy", metav1.GetOptions{})
		if err == nil {
			st, _, _ := unstructured.NestedMap(obj.Object, "status")
			if st["phase"] == PhaseLoaded && conditionStatus(st, controller.ConditionReady) == "True" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin is not Loaded and Ready after its controller started")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func conditionStatus(st map[string]any, typ string) string {
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
