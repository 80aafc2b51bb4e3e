package main

import (
	"context"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/examples/widget/operator"
	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

const widget = `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget",` +
	`"metadata":{"name":"demo","namespace":"default"},"spec":{"name":"Demo widget","size":"medium"}}`

// TestUnderHost runs the built module (bin/wasm/widget-plugin.wasm, built by
// `make plugins`) under the real host: what is shipped behaves like the
// operator package's logic.
func TestUnderHost(t *testing.T) {
	p := hosttest.Load(t, "widget-plugin", host.Config{})
	if !p.HasReconcile() || !p.HasFinalize() || p.HasAdmit() {
		t.Fatalf("exports: reconcile %v, finalize %v, admit %v", p.HasReconcile(), p.HasFinalize(), p.HasAdmit())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	resp, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widget)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Error != "" || resp.Status.String("state") != operator.StateProvisioning || len(resp.Children) != 1 {
		t.Fatalf("first reconcile: %+v", resp)
	}
	child := append(abi.RawJSON(nil), resp.Children[0]...)
	if ref := abi.RefOf(child); ref.Kind != operator.ChildKind || ref.Name != "demo" || child.Int("spec", "capacity") != 4 {
		t.Fatalf("child = %s", child)
	}

	before := time.Now().UTC().Truncate(time.Second)
	resp, err = p.Reconcile(ctx, &abi.ReconcileRequest{
		Object:   abi.RawJSON(widget),
		Children: map[string][]abi.RawJSON{operator.ChildKey: {child}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status.String("state") != operator.StateReady || resp.Status.Int("capacity") != 4 {
		t.Fatalf("second reconcile status = %s", resp.Status)
	}
	last, err := time.Parse(time.RFC3339, resp.Status.String("lastProvisioned"))
	if err != nil || last.Before(before) || last.After(time.Now().Add(time.Second)) {
		t.Fatalf("lastProvisioned = %q (%v), want the guest's current time", resp.Status.String("lastProvisioned"), err)
	}

	bad := abi.RawJSON(`{"metadata":{"name":"demo"},"spec":{"name":"x","size":"huge"}}`)
	resp, err = p.Reconcile(ctx, &abi.ReconcileRequest{Object: bad})
	if err != nil || !resp.Terminal || resp.Error == "" {
		t.Fatalf("invalid size: %+v, %v; want a terminal error", resp, err)
	}

	fin, err := p.Finalize(ctx, &abi.FinalizeRequest{
		Object:   abi.RawJSON(widget),
		Children: map[string][]abi.RawJSON{operator.ChildKey: {child}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !fin.Done || len(fin.Events) != 1 || fin.Events[0].Reason != "Deprovisioned" ||
		fin.Events[0].Message != "widget demo released 4 capacity units" {
		t.Fatalf("finalize = %+v", fin)
	}
}
