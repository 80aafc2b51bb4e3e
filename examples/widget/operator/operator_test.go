package operator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/examples/widget/operator"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
)

var clock = time.Date(2026, 11, 21, 4, 30, 0, 0, time.UTC)

const earlier = "2026-11-20T10:00:00Z"

func widget(size, status string) abi.RawJSON {
	s := `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"demo","namespace":"default","generation":2},` +
		`"spec":{"name":"Demo widget","size":"` + size + `"}`
	if status != "" {
		s += `,"status":` + status
	}
	return abi.RawJSON(s + "}")
}

func provision(size string, capacity int) abi.RawJSON {
	return abi.NewObject(nil).Str("apiVersion", operator.ChildAPIVersion).Str("kind", operator.ChildKind).
		Object("metadata", func(m *abi.Object) { m.Str("name", "demo").Str("namespace", "default") }).
		Object("spec", func(s *abi.Object) {
			s.Str("widget", "Demo widget").Str("size", size).Int("capacity", int64(capacity))
		}).Bytes()
}

func TestReconcile(t *testing.T) {
	op := &operator.Operator{Now: func() time.Time { return clock }}
	now := clock.Format(time.RFC3339)
	tests := []struct {
		name         string
		obj          abi.RawJSON
		children     []abi.RawJSON
		wantState    string
		wantCapacity int64 // of the desired child
		wantStatus   string
	}{
		{"new widget", widget("small", ""), nil, "Provisioning", 1,
			`{"state":"Provisioning","provision":"demo"}`},
		{"provision observed", widget("small", `{"state":"Provisioning"}`), []abi.RawJSON{provision("small", 1)}, "Ready", 1,
			`{"state":"Ready","provision":"demo","capacity":1,"lastProvisioned":"` + now + `"}`},
		{"steady state keeps its timestamp", widget("small", `{"state":"Ready","capacity":1,"lastProvisioned":"`+earlier+`"}`),
			[]abi.RawJSON{provision("small", 1)}, "Ready", 1,
			`{"state":"Ready","provision":"demo","capacity":1,"lastProvisioned":"` + earlier + `"}`},
		{"resized, old provision observed", widget("large", `{"state":"Ready","capacity":1,"lastProvisioned":"`+earlier+`"}`),
			[]abi.RawJSON{provision("small", 1)}, "Provisioning", 16,
			`{"state":"Provisioning","provision":"demo","capacity":1,"lastProvisioned":"` + earlier + `"}`},
		{"resized, new provision observed", widget("large", `{"state":"Provisioning","capacity":1,"lastProvisioned":"`+earlier+`"}`),
			[]abi.RawJSON{provision("large", 16)}, "Ready", 16,
			`{"state":"Ready","provision":"demo","capacity":16,"lastProvisioned":"` + now + `"}`},
		{"provision deleted by hand", widget("medium", `{"state":"Ready","capacity":4,"lastProvisioned":"`+earlier+`"}`),
			nil, "Provisioning", 4,
			`{"state":"Provisioning","provision":"demo","capacity":4,"lastProvisioned":"` + earlier + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &abi.ReconcileRequest{Object: tt.obj, Children: map[string][]abi.RawJSON{operator.ChildKey: tt.children}}
			resp, err := op.Reconcile(&plugintest.Host{}, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.RequeueAfter != 0 {
				t.Errorf("RequeueAfter = %v, want 0: a provision's change reconciles the widget", resp.RequeueAfter)
			}
			if got := resp.Status.String("state"); got != tt.wantState {
				t.Errorf("status.state = %q, want %q", got, tt.wantState)
			}
			if got := string(resp.Status); got != tt.wantStatus {
				t.Errorf("status = %s\nwant     %s", got, tt.wantStatus)
			}
			if len(resp.Children) != 1 {
				t.Fatalf("children = %d, want 1", len(resp.Children))
			}
			c := resp.Children[0]
			ref := abi.RefOf(c)
			if ref.APIVersion != operator.ChildAPIVersion || ref.Kind != operator.ChildKind || ref.Name != "demo" || ref.Namespace != "default" {
				t.Errorf("child = %+v", ref)
			}
			if got := c.Int("spec", "capacity"); got != tt.wantCapacity {
				t.Errorf("child capacity = %d, want %d", got, tt.wantCapacity)
			}
			if got := c.String("spec", "widget"); got != "Demo widget" {
				t.Errorf("child spec.widget = %q", got)
			}
			if got := c.String("metadata", "labels", "example.setpoint.dev/widget"); got != "demo" {
				t.Errorf("child label = %q", got)
			}
		})
	}
}

func TestReconcileInvalidSizeIsTerminal(t *testing.T) {
	op := &operator.Operator{}
	_, err := op.Reconcile(&plugintest.Host{}, &abi.ReconcileRequest{Object: widget("huge", "")})
	if !errors.Is(err, plugin.ErrTerminal) || !errors.Is(err, operator.ErrInvalidSize) {
		t.Fatalf("err = %v, want a terminal ErrInvalidSize", err)
	}
}

func TestReconcileLogsWhenConfigured(t *testing.T) {
	op := &operator.Operator{Now: func() time.Time { return clock }}
	h := &plugintest.Host{}
	req := &abi.ReconcileRequest{
		Object:   widget("medium", ""),
		Children: map[string][]abi.RawJSON{operator.ChildKey: {provision("medium", 4)}},
		Config:   map[string]string{"log": "true"},
	}
	if _, err := op.Reconcile(h, req); err != nil {
		t.Fatal(err)
	}
	if len(h.Logs) != 1 || h.Logs[0].Message != "widget provisioned" || strings.Join(h.Logs[0].Attrs, "=") != "capacity=4" {
		t.Fatalf("logs = %+v", h.Logs)
	}
}

func TestFinalize(t *testing.T) {
	op := &operator.Operator{}
	tests := []struct {
		name     string
		children []abi.RawJSON
		want     string
	}{
		{"with its provision", []abi.RawJSON{provision("large", 16)}, "widget demo released 16 capacity units"},
		{"provision already gone", nil, "widget demo released 0 capacity units"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := op.Finalize(&plugintest.Host{}, &abi.FinalizeRequest{
				Object: widget("large", ""), Children: map[string][]abi.RawJSON{operator.ChildKey: tt.children},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.Done || len(resp.Events) != 1 {
				t.Fatalf("resp = %+v", resp)
			}
			if ev := resp.Events[0]; ev.Type != "Normal" || ev.Reason != "Deprovisioned" || ev.Message != tt.want {
				t.Fatalf("event = %+v, want Deprovisioned %q", ev, tt.want)
			}
		})
	}
}

// TestDispatch runs the handlers through the SDK's codec, as the glue does.
func TestDispatch(t *testing.T) {
	op := &operator.Operator{Now: func() time.Time { return clock }}
	hs := op.Handlers()
	if hs.Bits() != abi.HasReconcile|abi.HasFinalize {
		t.Fatalf("handlers = %b", hs.Bits())
	}
	in := (&abi.ReconcileRequest{Object: widget("small", "")}).AppendJSON(nil)
	out, failed := hs.Dispatch(&plugintest.Host{}, abi.ExportReconcile, in, nil)
	if failed {
		t.Fatalf("dispatch failed: %s", out)
	}
	var resp abi.ReconcileResponse
	if err := resp.UnmarshalJSON(out); err != nil {
		t.Fatal(err)
	}
	if resp.Status.String("state") != "Provisioning" || len(resp.Children) != 1 {
		t.Fatalf("response = %s", out)
	}
}
