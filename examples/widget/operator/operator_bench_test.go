package operator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/examples/widget/operator"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
)

// steadyRequest is the reconcile of a Ready widget with its provision
// observed, as the engine writes it: the call a converged object costs.
func steadyRequest() []byte {
	obj := abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"creationTimestamp":"2026-11-21T04:00:00Z",` +
		`"finalizers":["setpoint.dev/widget"],"generation":1,"name":"w1","namespace":"default","resourceVersion":"42",` +
		`"uid":"0b6f3c9e-5d6c-4f0a-9a53-0e6f0f4d1a11"},"spec":{"name":"Widget 1","size":"medium"},` +
		`"status":{"capacity":4,"conditions":[{"lastTransitionTime":"2026-11-21T04:00:01Z","message":"reconciled",` +
		`"observedGeneration":1,"reason":"Reconciled","status":"True","type":"Ready"}],"lastProvisioned":"2026-11-21T04:00:01Z",` +
		`"observedGeneration":1,"provision":"w1","state":"Ready"}}`)
	child := abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"WidgetProvision","metadata":{"creationTimestamp":"2026-11-21T04:00:00Z",` +
		`"generation":1,"labels":{"example.setpoint.dev/widget":"w1"},"name":"w1","namespace":"default",` +
		`"ownerReferences":[{"apiVersion":"example.setpoint.dev/v1","blockOwnerDeletion":true,"controller":true,"kind":"Widget",` +
		`"name":"w1","uid":"0b6f3c9e-5d6c-4f0a-9a53-0e6f0f4d1a11"}],"resourceVersion":"43","uid":"4c1d2e3f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"},` +
		`"spec":{"capacity":4,"size":"medium","widget":"Widget 1"}}`)
	req := &abi.ReconcileRequest{Object: obj, Children: map[string][]abi.RawJSON{operator.ChildKey: {child}}}
	return req.AppendJSON(nil)
}

// BenchmarkDispatch runs the steady-state reconcile through the SDK's codec
// natively, as the guest runs it (with Reuse): decode, handler, encode. Its
// allocations are what the guest pays for, at several times the native
// cost.
func BenchmarkDispatch(b *testing.B) {
	op := &operator.Operator{Now: func() time.Time { return clock }, Reuse: true}
	hs := op.Handlers()
	in := steadyRequest()
	var out []byte
	h := &plugintest.Host{}
	b.ReportAllocs()
	for b.Loop() {
		var failed bool
		out, failed = hs.Dispatch(h, abi.ExportReconcile, in, out[:0])
		if failed {
			b.Fatalf("dispatch failed: %s", out)
		}
	}
}

// TestReuse checks that an operator with Reuse answers like one without
// and, in the steady state, allocates nothing through the SDK's dispatch.
func TestReuse(t *testing.T) {
	now := func() time.Time { return clock }
	in := steadyRequest()
	plain := (&operator.Operator{Now: now}).Handlers()
	want, failed := plain.Dispatch(&plugintest.Host{}, abi.ExportReconcile, in, nil)
	if failed {
		t.Fatalf("dispatch failed: %s", want)
	}
	reuse := (&operator.Operator{Now: now, Reuse: true}).Handlers()
	h := &plugintest.Host{}
	var out []byte
	for range 3 {
		out, failed = reuse.Dispatch(h, abi.ExportReconcile, in, out[:0])
		if failed || string(out) != string(want) {
			t.Fatalf("with Reuse: %s\nwithout:    %s", out, want)
		}
	}
	allocs := testing.AllocsPerRun(100, func() { out, _ = reuse.Dispatch(h, abi.ExportReconcile, in, out[:0]) })
	if allocs != 0 {
		t.Fatalf("%v allocations per steady-state call with Reuse, want 0", allocs)
	}
	// The call that first observes the provision stamps lastProvisioned,
	// also without allocating.
	first := (&abi.ReconcileRequest{
		Object:   widget("medium", `{"state":"Provisioning","provision":"demo"}`),
		Children: map[string][]abi.RawJSON{operator.ChildKey: {provision("medium", 4)}},
	}).AppendJSON(nil)
	want, failed = plain.Dispatch(&plugintest.Host{}, abi.ExportReconcile, first, nil)
	if failed || !strings.Contains(string(want), `"lastProvisioned":"`+clock.Format(time.RFC3339)+`"`) {
		t.Fatalf("first observation: %s", want)
	}
	out, failed = reuse.Dispatch(h, abi.ExportReconcile, first, out[:0])
	if failed || string(out) != string(want) {
		t.Fatalf("first observation with Reuse: %s\nwithout:                    %s", out, want)
	}
	allocs = testing.AllocsPerRun(100, func() { out, _ = reuse.Dispatch(h, abi.ExportReconcile, first, out[:0]) })
	if allocs != 0 {
		t.Fatalf("%v allocations per first-observation call with Reuse, want 0", allocs)
	}
}
