package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/examples/replicagroup/operator"
	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// TestUnderHost runs the built module (bin/wasm/replicagroup-plugin.wasm)
// under the real host and compares it with the operator package run
// natively.
func TestUnderHost(t *testing.T) {
	p := hosttest.Load(t, "replicagroup-plugin", host.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obj := abi.RawJSON(`{"metadata":{"name":"web","namespace":"default"},"spec":{"replicas":4,"message":"hi"}}`)
	for _, observed := range []int{0, 2, 4, 6} {
		var children []abi.RawJSON
		for i := range observed {
			children = append(children, abi.NewObject(nil).Str("apiVersion", operator.ChildAPIVersion).Str("kind", operator.ChildKind).
				Object("metadata", func(m *abi.Object) { m.Str("name", operator.ChildName("web", i)) }).
				Object("spec", func(s *abi.Object) { s.Str("group", "web").Int("index", int64(i)).Str("message", "hi") }).Bytes())
		}
		req := &abi.ReconcileRequest{Object: obj, Children: map[string][]abi.RawJSON{operator.ChildKey: children}}
		got, err := p.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		want, err := operator.Reconcile(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.AppendJSON(nil)) != string(want.AppendJSON(nil)) {
			t.Fatalf("observed %d: module answered %s\nnative answers %s", observed, got.AppendJSON(nil), want.AppendJSON(nil))
		}
	}
	resp, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: obj, Config: map[string]string{"maxReplicas": "3"}})
	if err != nil || resp.Terminal || !strings.Contains(resp.Error, "too many replicas") {
		t.Fatalf("over the limit: %+v, %v; want a retryable error", resp, err)
	}
}
