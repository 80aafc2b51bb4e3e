package host_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

const widgetObj = `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w1","namespace":"default","uid":"u1","creationTimestamp":"2026-01-02T03:04:05Z"},"spec":{"name":"gizmo","size":"medium"}}`

// TestWidgetConformance runs one body against the same logic on both ABIs.
func TestWidgetConformance(t *testing.T) {
	for _, guest := range []struct {
		name string
		abi  host.ABI
	}{{"widget", host.NativeABI}, {"extismwidget", host.ExtismABI}} {
		t.Run(guest.name, func(t *testing.T) {
			ctx := context.Background()
			p := hosttest.Load(t, guest.name, host.Config{})
			if p.ABI() != guest.abi || !p.HasReconcile() || !p.HasAdmit() || !p.HasFinalize() {
				t.Fatalf("abi %v handlers r=%v a=%v f=%v", p.ABI(), p.HasReconcile(), p.HasAdmit(), p.HasFinalize())
			}
			if !strings.HasPrefix(p.Digest(), "sha256:") {
				t.Fatalf("digest %q", p.Digest())
			}

			resp, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj)})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(resp.Status); got != `{"state":"Provisioning","replicas":3,"lastProvisioned":"2026-01-02T03:04:05Z"}` {
				t.Errorf("status = %s", got)
			}
			if len(resp.Children) != 1 || resp.Children[0].String("metadata", "name") != "w1-config" || resp.Children[0].String("data", "replicas") != "3" {
				t.Errorf("children = %s", resp.Children)
			}
			resp, err = p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj),
				Children: map[string][]abi.RawJSON{"ConfigMap": {resp.Children[0]}}})
			if err != nil || resp.Status.String("state") != "Ready" {
				t.Fatalf("second reconcile: %v %s", err, resp.Status)
			}
			bad := strings.Replace(widgetObj, `"medium"`, `"huge"`, 1)
			resp, err = p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(bad)})
			if err != nil || !resp.Terminal || !strings.Contains(resp.Error, "spec.size") {
				t.Fatalf("invalid size: %v %+v", err, resp)
			}

			adm, err := p.Admit(ctx, &abi.AdmissionRequest{Operation: abi.Create, Object: abi.RawJSON(`{"spec":{}}`), DryRun: true})
			if err != nil || adm.Allowed || adm.Code != 422 || adm.Message != "spec.name is required" {
				t.Fatalf("admit = %+v, %v", adm, err)
			}
			adm, err = p.Admit(ctx, &abi.AdmissionRequest{Operation: abi.Create, Object: abi.RawJSON(widgetObj)})
			if err != nil || !adm.Allowed {
				t.Fatalf("admit = %+v, %v", adm, err)
			}
			fin, err := p.Finalize(ctx, &abi.FinalizeRequest{Object: abi.RawJSON(widgetObj)})
			if err != nil || !fin.Done {
				t.Fatalf("finalize = %+v, %v", fin, err)
			}
		})
	}
}

func TestCallDeadlineAndCancel(t *testing.T) {
	p := hosttest.Load(t, "faulty", host.Config{Limits: host.Limits{CallTimeout: 200 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: map[string]string{"mode": "loop"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestSpinningGuestDoesNotStallGC: compiled guest code cannot be preempted
// by the Go scheduler, so a guest that never left it would stall a
// stop-the-world GC and, with it, the goroutine that stops the guest. The
// instrumented loops leave compiled code periodically; GCs during a spin
// complete and the deadline still stops it.
func TestSpinningGuestDoesNotStallGC(t *testing.T) {
	p := hosttest.Load(t, "faulty", host.Config{Limits: host.Limits{CallTimeout: 2 * time.Second}})
	if got := p.Preemption(); got != "loop-checks" {
		t.Fatalf("preemption = %q, want loop-checks", got)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Reconcile(context.Background(), &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: map[string]string{"mode": "loop"}})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	for range 3 {
		gcDone := make(chan struct{})
		go func() { runtime.GC(); close(gcDone) }()
		select {
		case <-gcDone:
		case <-time.After(10 * time.Second):
			t.Fatal("a GC did not complete while the guest spun")
		}
	}
	if err := <-done; !errors.Is(err, host.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
}
