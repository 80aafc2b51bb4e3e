package typed_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
	"github.com/setpoint-dev/setpoint/sdk/typed"
)

type spec struct {
	Name string `json:"name"`
	Size string `json:"size"`
}

type status struct {
	State string `json:"state,omitempty"`
}

type child struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   typed.Metadata `json:"metadata"`
	Spec       spec           `json:"spec"`
}

const widget = `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"demo","namespace":"default","generation":2,"labels":{"team":"a"}},"spec":{"name":"Demo","size":"medium"},"status":{"state":"Provisioning"}}`

func reconcile(h plugin.Host, req *typed.Request[spec, status]) (*typed.Result[status], error) {
	if req.Object.Spec.Size == "huge" {
		return nil, plugin.Terminal(errors.New("too big"))
	}
	kids, err := typed.Children[child](req.Raw, "Gadget.example.setpoint.dev")
	if err != nil {
		return nil, err
	}
	st := status{State: "Provisioning"}
	if len(kids) == 1 && kids[0].Spec == req.Object.Spec {
		st.State = "Ready"
	}
	c := child{APIVersion: "example.setpoint.dev/v1", Kind: "Gadget", Spec: req.Object.Spec}
	c.Metadata.Name = req.Object.Metadata.Name
	return &typed.Result[status]{Status: &st, Children: []any{c},
		Events: []abi.Event{{Type: "Normal", Reason: "Seen", Message: req.Object.Metadata.Labels["team"]}}}, nil
}

func call(t *testing.T, hs *plugin.Handlers, export string, req interface{ AppendJSON([]byte) []byte }) []byte {
	t.Helper()
	out, failed := hs.Dispatch(&plugintest.Host{}, export, req.AppendJSON(nil), nil)
	if failed {
		t.Fatalf("%s failed: %s", export, out)
	}
	return out
}

func TestReconcile(t *testing.T) {
	hs := &plugin.Handlers{Reconcile: typed.Reconcile(reconcile)}
	tests := []struct {
		name      string
		object    string
		children  map[string][]abi.RawJSON
		state     string
		errPrefix string
		terminal  bool
	}{
		{name: "first", object: widget, state: "Provisioning"},
		{name: "child observed", object: widget, state: "Ready",
			children: map[string][]abi.RawJSON{"Gadget.example.setpoint.dev": {abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"Gadget","metadata":{"name":"demo"},"spec":{"name":"Demo","size":"medium"}}`)}}},
		{name: "handler error", object: strings.Replace(widget, "medium", "huge", 1), errPrefix: "too big", terminal: true},
		{name: "does not decode", object: strings.Replace(widget, `"medium"`, `7`, 1), errPrefix: "typed: decoding Widget demo:", terminal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := call(t, hs, abi.ExportReconcile, &abi.ReconcileRequest{Object: abi.RawJSON(tt.object), Children: tt.children})
			var resp abi.ReconcileResponse
			if err := resp.UnmarshalJSON(out); err != nil {
				t.Fatal(err)
			}
			if tt.errPrefix != "" {
				if !strings.HasPrefix(resp.Error, tt.errPrefix) || resp.Terminal != tt.terminal {
					t.Fatalf("error %q terminal %v, want %q… terminal %v", resp.Error, resp.Terminal, tt.errPrefix, tt.terminal)
				}
				return
			}
			if resp.Error != "" || resp.Status.String("state") != tt.state {
				t.Fatalf("response %s", out)
			}
			if len(resp.Children) != 1 || resp.Children[0].String("spec", "size") != "medium" || resp.Children[0].String("metadata", "name") != "demo" {
				t.Fatalf("children %s", out)
			}
			if len(resp.Events) != 1 || resp.Events[0].Message != "a" {
				t.Fatalf("events %+v", resp.Events)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	hs := &plugin.Handlers{Admit: typed.Admit(func(h plugin.Host, req *typed.AdmitRequest[spec, status]) (*abi.AdmissionResponse, error) {
		switch {
		case req.Raw.Operation == abi.Delete:
			if req.Object != nil || req.OldObject == nil {
				t.Errorf("DELETE decoded object %v old %v", req.Object, req.OldObject)
			}
			return typed.Allowed(), nil
		case req.Object.Spec.Name == "":
			return typed.Denied(0, "spec.name is required"), nil
		case req.Object.Spec.Size == "":
			s := req.Object.Spec
			s.Size = "small"
			return typed.SetSpec(s, "size defaulted to small")
		}
		return typed.Allowed(), nil
	})}
	tests := []struct {
		name, op, object, old string
		allowed               bool
		code                  int
		patch                 string
	}{
		{name: "allowed", op: "CREATE", object: widget, allowed: true},
		{name: "denied", op: "CREATE", object: strings.Replace(widget, `"Demo"`, `""`, 1), code: 0},
		{name: "mutated", op: "UPDATE", object: strings.Replace(widget, `"medium"`, `""`, 1), old: widget, allowed: true,
			patch: `[{"op":"add","path":"/spec","value":{"name":"Demo","size":"small"}}]`},
		{name: "delete", op: "DELETE", old: widget, allowed: true},
		{name: "undecodable", op: "CREATE", object: strings.Replace(widget, `"medium"`, `[]`, 1), code: 422},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := call(t, hs, abi.ExportAdmit, &abi.AdmissionRequest{Operation: abi.Operation(tt.op), Object: abi.RawJSON(tt.object), OldObject: abi.RawJSON(tt.old)})
			var resp abi.AdmissionResponse
			if err := resp.UnmarshalJSON(out); err != nil {
				t.Fatal(err)
			}
			if resp.Allowed != tt.allowed || resp.Code != tt.code || string(resp.Patch) != tt.patch {
				t.Fatalf("response %s", out)
			}
			if tt.patch != "" && !json.Valid(resp.Patch) {
				t.Fatalf("patch is not JSON: %s", resp.Patch)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	raw := abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"demo","namespace":"default","uid":"u-1",` +
		`"resourceVersion":"42","generation":3,"creationTimestamp":"2026-01-02T03:04:05Z","labels":{"team":"a"},"annotations":{"note":"x\"y"},` +
		`"finalizers":["example.setpoint.dev/cleanup"],"managedFields":[{"manager":"m"}]},"spec":{"name":"Demo","size":"small"},"status":null}`)
	got, err := typed.Decode[spec, status](raw)
	if err != nil {
		t.Fatal(err)
	}
	want := &typed.Object[spec, status]{APIVersion: "example.setpoint.dev/v1", Kind: "Widget",
		Metadata: typed.Metadata{Name: "demo", Namespace: "default", UID: "u-1", ResourceVersion: "42", Generation: 3,
			CreationTimestamp: "2026-01-02T03:04:05Z", Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": `x"y`},
			Finalizers: []string{"example.setpoint.dev/cleanup"}},
		Spec: spec{Name: "Demo", Size: "small"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := typed.Decode[spec, status](abi.RawJSON(`{"kind":"Widget","metadata":{"name":"d","finalizers":"x"}}`)); err == nil ||
		!strings.Contains(err.Error(), "metadata.finalizers") {
		t.Fatalf("bad finalizers: %v", err)
	}
}
