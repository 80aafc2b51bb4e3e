package glue_test

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/internal/glue"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// TestCall runs export calls through a Guest as both ABIs' glue does: the
// handler reaches the host through the call function, its response is
// encoded into the reused output, and failures come back flagged.
func TestCall(t *testing.T) {
	var sent []plugin.HostFunc
	g := glue.New(func(fn plugin.HostFunc, req []byte) []byte {
		sent = append(sent, fn)
		return []byte(`{"found":true,"object":{"kind":"ConfigMap"}}`)
	})
	if g.Bits() != 0 {
		t.Fatalf("bits before Register = %d", g.Bits())
	}
	g.Register(plugin.Handlers{Reconcile: func(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
		obj, found, err := h.Get(abi.GetRequest{Name: req.Object.String("metadata", "name")})
		if err != nil || !found {
			return nil, err
		}
		return &abi.ReconcileResponse{Status: abi.RawJSON(`{"seen":` + string(obj) + `}`)}, nil
	}})
	if g.Bits() != abi.HasReconcile {
		t.Fatalf("bits = %d, want %d", g.Bits(), abi.HasReconcile)
	}
	in := (&abi.ReconcileRequest{Object: abi.RawJSON(`{"metadata":{"name":"w"}}`)}).AppendJSON(nil)
	out, failed := g.Call(abi.ExportReconcile, in)
	if failed || string(out) != `{"status":{"seen":{"kind":"ConfigMap"}}}` {
		t.Fatalf("reconcile = %s, failed %v", out, failed)
	}
	if len(sent) != 1 || sent[0] != plugin.HostGet {
		t.Fatalf("host calls = %v", sent)
	}
	first := &out[0]
	out, _ = g.Call(abi.ExportReconcile, in)
	if &out[0] != first {
		t.Error("the output buffer was not reused")
	}
	out, failed = g.Call(abi.ExportAdmit, []byte(`{}`))
	if !failed || !strings.Contains(string(out), "no admit handler") {
		t.Fatalf("admit without a handler = %s, failed %v", out, failed)
	}
	out, failed = g.Call(abi.ExportReconcile, []byte(`not json`))
	if !failed || !strings.Contains(string(out), "reading reconcile request") {
		t.Fatalf("bad input = %s, failed %v", out, failed)
	}
}
