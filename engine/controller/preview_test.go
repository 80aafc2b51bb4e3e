package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

func TestPreviewReconcile(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "ns", "uid": "u-1", "generation": int64(2)}}}
	note := Kind{Resource: schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "notes"}, Kind: "Note", Namespaced: true}
	child := `{"apiVersion":"example.setpoint.dev/v1","kind":"Note","metadata":{"name":"a"},"spec":{"x":1}}`
	observed := func(name string, x int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Note",
			"metadata": map[string]any{"name": name, "namespace": "ns"}, "spec": map[string]any{"x": x}}}
		setControllerRef(u, controllerRef(parent))
		return u
	}
	tests := []struct {
		name     string
		observed []*unstructured.Unstructured
		resp     *abi.ReconcileResponse
		callErr  error
		writes   string // op:name, comma-separated
		failure  string // prefix
		state    string
	}{
		{name: "create", resp: &abi.ReconcileResponse{Status: abi.RawJSON(`{"state":"Provisioning"}`), Children: []abi.RawJSON{abi.RawJSON(child)}},
			writes: "create:a", state: "Provisioning"},
		{name: "up to date, and a stale child deleted", observed: []*unstructured.Unstructured{observed("a", 1), observed("b", 1)},
			resp: &abi.ReconcileResponse{Children: []abi.RawJSON{abi.RawJSON(child)}}, writes: "delete:b"},
		{name: "update", observed: []*unstructured.Unstructured{observed("a", 7)}, resp: &abi.ReconcileResponse{Children: []abi.RawJSON{abi.RawJSON(child)}},
			writes: "update:a"},
		{name: "kind not owned", resp: &abi.ReconcileResponse{Children: []abi.RawJSON{abi.RawJSON(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`)}},
			failure: "TerminalError: child 0"},
		{name: "plugin error", resp: &abi.ReconcileResponse{Error: "boom"}, failure: "ReconcileFailed: boom"},
		{name: "call failed", callErr: errors.New("host: trap"), failure: "PluginError: host: trap"},
		{name: "status not an object", resp: &abi.ReconcileResponse{Status: abi.RawJSON(`[1]`)}, failure: "TerminalError: plugin: status is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PreviewReconcile(parent, true, []Kind{note}, tt.observed, tt.resp, tt.callErr, now)
			var writes []string
			for _, w := range p.Writes {
				writes = append(writes, w.Op+":"+w.Object.GetName())
				if w.Op == "create" && (w.Object.GetNamespace() != "ns" || len(w.Object.GetOwnerReferences()) != 1) {
					t.Errorf("created child %v lacks the namespace or ownerReference", w.Object.Object)
				}
			}
			if got := strings.Join(writes, ","); got != tt.writes {
				t.Errorf("writes %q, want %q", got, tt.writes)
			}
			if !strings.HasPrefix(p.Failure, tt.failure) || (tt.failure == "") != (p.Failure == "") {
				t.Errorf("failure %q, want %q", p.Failure, tt.failure)
			}
			if p.Status["observedGeneration"] != int64(2) || p.Status["state"] != nilIfEmpty(tt.state) {
				t.Errorf("status %v", p.Status)
			}
			ready, _ := readyOf(p.Status)
			if want := map[bool]string{true: "True", false: "False"}[tt.failure == ""]; ready["status"] != want {
				t.Errorf("Ready %v, want %s", ready, want)
			}
		})
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
