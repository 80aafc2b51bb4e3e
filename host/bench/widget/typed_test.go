package widget

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
)

// TestTypedMatchesRaw: the typed variant the benchmarks compare computes
// the same response as the raw one, so the comparison is like with like.
func TestTypedMatchesRaw(t *testing.T) {
	const obj = `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","creationTimestamp":"2026-01-02T03:04:05Z"},` +
		`"spec":{"name":"gizmo","size":"medium","tags":["a"],"template":{"image":"x"}}}`
	for _, children := range []map[string][]abi.RawJSON{nil, {"ConfigMap": {abi.RawJSON(`{}`)}}} {
		req := &abi.ReconcileRequest{Object: abi.RawJSON(obj), Children: children}
		raw, err := Reconcile(&plugintest.Host{}, req)
		if err != nil {
			t.Fatal(err)
		}
		want := decode(t, raw)
		got, err := TypedReconcile(&plugintest.Host{}, req)
		if err != nil {
			t.Fatal(err)
		}
		if g := decode(t, got); !reflect.DeepEqual(g, want) {
			t.Fatalf("typed response %v, raw %v", g, want)
		}
	}
	bad := &abi.ReconcileRequest{Object: abi.RawJSON(`{"spec":{"size":"huge"}}`)}
	if _, err := TypedReconcile(&plugintest.Host{}, bad); err == nil {
		t.Fatal("typed: no error for an invalid size")
	}
}

func decode(t *testing.T, resp *abi.ReconcileResponse) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(resp.AppendJSON(nil), &m); err != nil {
		t.Fatal(err)
	}
	return m
}
