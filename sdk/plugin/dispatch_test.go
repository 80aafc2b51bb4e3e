package plugin_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
)

const obj = `{"apiVersion":"v1","kind":"Thing","metadata":{"name":"a"},"spec":{"mode":"ok"}}`

func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	switch req.Object.String("spec", "mode") {
	case "panic":
		panic("boom")
	case "fail":
		return nil, errors.New("transient")
	case "terminal":
		return nil, plugin.Terminal(errors.New("bad spec"))
	}
	h.Log("info", "reconciled", "name", req.Object.String("metadata", "name"))
	return &abi.ReconcileResponse{Status: abi.NewObject(nil).Str("state", "Ready").Bytes()}, nil
}

func TestDispatch(t *testing.T) {
	hs := plugin.Handlers{
		Reconcile: reconcile,
		Admit: func(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
			return nil, errors.New("nope")
		},
	}
	if got := hs.Bits(); got != abi.HasReconcile|abi.HasAdmit {
		t.Fatalf("Handlers = %b", got)
	}
	in := func(mode string) []byte {
		return (&abi.ReconcileRequest{Object: abi.RawJSON(strings.Replace(obj, `"ok"`, `"`+mode+`"`, 1))}).AppendJSON(nil)
	}
	tests := []struct {
		name       string
		export     string
		input      []byte
		wantFailed bool
		want       string
	}{
		{"ok", abi.ExportReconcile, in("ok"), false, `{"status":{"state":"Ready"}}`},
		{"handler error", abi.ExportReconcile, in("fail"), false, `{"error":"transient"}`},
		{"terminal error", abi.ExportReconcile, in("terminal"), false, `{"error":"bad spec","terminal":true}`},
		{"panic", abi.ExportReconcile, in("panic"), true, "panic: boom"},
		{"bad input", abi.ExportReconcile, []byte(`{"object":`), true, "plugin: reading reconcile request: abi: invalid JSON"},
		{"admit error denies", abi.ExportAdmit, []byte(`{"operation":"CREATE"}`), false, `{"allowed":false,"message":"nope"}`},
		{"no finalize", abi.ExportFinalize, []byte(`{}`), true, "plugin: no finalize handler registered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &plugintest.Host{}
			out, failed := hs.Dispatch(h, tt.export, tt.input, nil)
			if failed != tt.wantFailed || !strings.HasPrefix(string(out), tt.want) {
				t.Fatalf("Dispatch = %q, %v; want prefix %q, %v", out, failed, tt.want, tt.wantFailed)
			}
		})
	}
}

func TestPlugintestHost(t *testing.T) {
	h := &plugintest.Host{Deny: func(kind string) error {
		if kind == "Secret" {
			return errors.New("plugin may not read Secret")
		}
		return nil
	}}
	h.Add(abi.RawJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","labels":{"app":"x"}}}`))
	if o, found, err := h.Get(abi.GetRequest{Kind: "ConfigMap", Namespace: "ns", Name: "a"}); err != nil || !found || o.String("metadata", "name") != "a" {
		t.Fatalf("Get = %s %v %v", o, found, err)
	}
	if l, err := h.List(abi.ListRequest{Kind: "ConfigMap", LabelSelector: "app=y"}); err != nil || len(l) != 0 {
		t.Fatalf("List = %v %v", l, err)
	}
	if _, err := h.List(abi.ListRequest{Kind: "Secret"}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("List Secret err = %v", err)
	}
}
