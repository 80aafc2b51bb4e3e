package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// A controller stuck in a plugin call that ignores cancellation (a guest
// in a blocking host call) delays only what must wait for it: another
// kind's controller starts at once, a controller of the same kind waits,
// and Run returns within StopTimeout, abandoning it.
func TestManagerStuckControllerBlocksNoOther(t *testing.T) {
	svc := newEngine(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { close(release) })
	stuck := newController(t, svc, "stuck", controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
		once.Do(func() { close(entered) })
		<-release // ignores ctx, as a guest stuck in a host call does
		return &abi.ReconcileResponse{}, nil
	}), nil)
	m := controller.NewManager(controller.ManagerOptions{Logger: quietLogger(), StopTimeout: 500 * time.Millisecond})
	m.Put(stuck)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	create(t, svc, widgets, newWidget("w", "small"))
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck controller never reconciled")
	}

	m.Remove("stuck")
	reconciled := make(chan struct{}, 1)
	other := newController(t, svc, "other", controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
		select {
		case reconciled <- struct{}{}:
		default:
		}
		return &abi.ReconcileResponse{}, nil
	}), func(o *controller.Options) { o.For, o.Owns = gizmoKind, nil })
	start := time.Now()
	m.Put(other)
	create(t, svc, gizmos, unstructuredGizmo{name: "g"}.obj())
	select {
	case <-reconciled:
		t.Logf("another kind's controller reconciled %v after the stuck one was removed", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("another kind's controller did not start while a stopping one is stuck")
	}
	select {
	case <-m.Started(other):
	default:
		t.Error("Started(other) is not closed although it runs")
	}

	next := newController(t, svc, "next", controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
		return &abi.ReconcileResponse{}, nil
	}), nil)
	m.Put(next)
	testsupport.Eventually(t, 5*time.Second, "the same kind's controller waits for the stuck one", func() bool { return m.WaitsFor("next") == "stuck" })
	select {
	case <-m.Started(next):
		t.Error("a controller of the stuck one's kind started while it still runs")
	default:
	}

	cancel()
	start = time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Run returned %v after cancel, abandoning the stuck controller", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within StopTimeout with a stuck controller")
	}
}

type unstructuredGizmo struct{ name string }

func (g unstructuredGizmo) obj() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Gizmo",
		"metadata": map[string]any{"name": g.name, "namespace": "default"},
		"spec":     map[string]any{"size": "small"},
	}}
}
