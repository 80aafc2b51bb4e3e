package host_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// writeCall is one WriteObject call the host made.
type writeCall struct {
	plugin, fn string
	req        abi.WriteRequest
	ctxErr     error // the context's error when the write returned
}

// writer is an ObjectReader and ObjectWriter whose answers depend on the
// object's name: exists (AlreadyExists), stale (Conflict), missing
// (NotFound), bad (Invalid), slow (waits for the call's context); any other
// name is written, and answered with resourceVersion 2.
type writer struct {
	objects
	mu  sync.Mutex
	got []writeCall
}

func (w *writer) WriteObject(ctx context.Context, plugin, fn string, req abi.WriteRequest) abi.WriteResponse {
	ref := abi.ObjectRef{APIVersion: req.APIVersion, Kind: req.Kind, Namespace: req.Namespace, Name: req.Name}
	if len(req.Object) > 0 {
		ref = abi.RefOf(req.Object)
	}
	var resp abi.WriteResponse
	switch ref.Name {
	case "exists":
		resp = abi.WriteResponse{Error: `configmaps "exists" already exists`, Reason: "AlreadyExists", Code: 409}
	case "stale":
		resp = abi.WriteResponse{Error: "the object has been modified", Reason: "Conflict", Code: 409}
	case "missing":
		resp = abi.WriteResponse{Error: `configmaps "missing" not found`, Reason: "NotFound", Code: 404}
	case "bad":
		resp = abi.WriteResponse{Error: `ConfigMap "bad" is invalid: data.a: Invalid value`, Reason: "Invalid", Code: 422}
	case "slow":
		<-ctx.Done()
		resp = abi.WriteResponse{Error: ctx.Err().Error()} // no reason: the host fills one in
	default:
		resp.Object = abi.NewObject(nil).Str("apiVersion", ref.APIVersion).Str("kind", ref.Kind).
			Object("metadata", func(o *abi.Object) { o.Str("name", ref.Name).Str("resourceVersion", "2") }).Bytes()
	}
	w.mu.Lock()
	w.got = append(w.got, writeCall{plugin: plugin, fn: fn, req: req, ctxErr: ctx.Err()})
	w.mu.Unlock()
	return resp
}

func (w *writer) calls() []writeCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]writeCall(nil), w.got...)
}

var _ host.ObjectWriter = (*writer)(nil)

func configMap(name string) string {
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"},"data":{"a":"b"}}`
}

func writeConfig(op string, kv ...string) map[string]string {
	cfg := map[string]string{"op": op, "apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cm"}
	for i := 0; i+1 < len(kv); i += 2 {
		cfg[kv[i]] = kv[i+1]
	}
	return cfg
}

// TestWriteHostFunctions runs the writer guest on both ABIs: each write
// reaches the server's ObjectWriter as the right function, attributed to the
// plugin, and its answer (object, or error with reason and code) reaches the
// guest; kinds outside the permissions are refused before the server sees
// them.
func TestWriteHostFunctions(t *testing.T) {
	for _, guest := range []string{"writer", "extismwriter"} {
		t.Run(guest, func(t *testing.T) {
			w := &writer{}
			h := hosttest.NewHost(t, host.Options{Objects: w})
			p := hosttest.LoadWith(t, h, guest, host.Config{Permissions: host.Permissions{Write: []string{"ConfigMap", "Widget.example.setpoint.dev"}}})
			ctx := context.Background()
			tests := []struct {
				name      string
				cfg       map[string]string
				fn, sub   string
				wantError string // in the guest's error; empty: the write succeeds
			}{
				{"create", writeConfig("create", "object", configMap("cm")), abi.HostCreate, "", ""},
				{"update", writeConfig("update", "object", configMap("cm")), abi.HostUpdate, "", ""},
				{"update status", writeConfig("updatestatus", "object", widgetObj), abi.HostUpdate, "status", ""},
				{"patch", writeConfig("patch", "patch", `{"data":{"a":"c"}}`), abi.HostPatch, "", ""},
				{"patch status", writeConfig("patchstatus", "apiVersion", "example.setpoint.dev/v1", "kind", "Widget", "patch", `{"status":{"state":"Ready"}}`), abi.HostPatch, "status", ""},
				{"delete", writeConfig("delete", "uid", "u-1"), abi.HostDelete, "", ""},
				{"already exists", writeConfig("create", "object", configMap("exists")), abi.HostCreate, "", `already exists (reason AlreadyExists, code 409)`},
				{"conflict", writeConfig("update", "object", configMap("stale")), abi.HostUpdate, "", `modified (reason Conflict, code 409)`},
				{"not found", writeConfig("delete", "name", "missing"), abi.HostDelete, "", `not found (reason NotFound, code 404)`},
				{"invalid", writeConfig("patch", "name", "bad", "patch", `{}`), abi.HostPatch, "", `data.a: Invalid value (reason Invalid, code 422)`},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					before := len(w.calls())
					resp, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: tt.cfg})
					if err != nil {
						t.Fatal(err)
					}
					calls := w.calls()
					if len(calls) != before+1 {
						t.Fatalf("the writer saw %d writes, want 1", len(calls)-before)
					}
					c := calls[len(calls)-1]
					if c.plugin != guest || c.fn != tt.fn || c.req.Subresource != tt.sub {
						t.Errorf("write reached the server as %q %s/%s, want %q %s/%s", c.plugin, c.fn, c.req.Subresource, guest, tt.fn, tt.sub)
					}
					if tt.cfg["uid"] != "" && c.req.UID != tt.cfg["uid"] {
						t.Errorf("delete precondition uid %q, want %q", c.req.UID, tt.cfg["uid"])
					}
					if tt.wantError != "" {
						if !strings.Contains(resp.Error, tt.wantError) {
							t.Errorf("guest error %q, want %q", resp.Error, tt.wantError)
						}
						return
					}
					if resp.Error != "" {
						t.Fatalf("guest error %q", resp.Error)
					}
					if tt.fn != abi.HostDelete && resp.Status.String("written", "metadata", "resourceVersion") != "2" {
						t.Errorf("the guest got %s, want the written object", resp.Status)
					}
				})
			}

			// Denials never reach the server.
			before := len(w.calls())
			resp, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj),
				Config: writeConfig("create", "object", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`)})
			want := `host: permission denied: plugin "` + guest + `" may not write Secret (reason Forbidden, code 403)`
			if err != nil || !strings.Contains(resp.Error, want) {
				t.Errorf("write of a kind not granted: %v %q, want %q", err, resp.Error, want)
			}
			resp, err = p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: writeConfig("delete", "kind", "Gadget", "apiVersion", "example.setpoint.dev/v1")})
			if err != nil || !strings.Contains(resp.Error, "may not write Gadget.example.setpoint.dev (reason Forbidden, code 403)") {
				t.Errorf("delete of a kind not granted: %v %q", err, resp.Error)
			}
			resp, err = p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: writeConfig("patch", "patch", `{}`, "name", "")})
			if err != nil || !strings.Contains(resp.Error, "names no kind or no name (reason BadRequest, code 400)") {
				t.Errorf("patch without a name: %v %q", err, resp.Error)
			}
			if n := len(w.calls()) - before; n != 0 {
				t.Errorf("%d refused writes reached the server", n)
			}
		})
	}
}

// TestWriteRefusedDuringAdmit checks that admit calls may not write, even a
// kind they are granted, while finalize calls may.
func TestWriteRefusedDuringAdmit(t *testing.T) {
	for _, guest := range []string{"writer", "extismwriter"} {
		t.Run(guest, func(t *testing.T) {
			w := &writer{}
			h := hosttest.NewHost(t, host.Options{Objects: w})
			p := hosttest.LoadWith(t, h, guest, host.Config{Permissions: host.Permissions{Write: []string{"*"}}})
			ctx := context.Background()
			resp, err := p.Admit(ctx, &abi.AdmissionRequest{Operation: abi.Create, Object: abi.RawJSON(widgetObj),
				Config: writeConfig("create", "object", configMap("cm"))})
			want := `host: permission denied: plugin "` + guest + `" may not write during admission (create ConfigMap) (reason Forbidden, code 403)`
			if err != nil || resp.Allowed || !strings.Contains(resp.Message, want) {
				t.Errorf("admit that writes: %v %+v, want a denial with %q", err, resp, want)
			}
			if n := len(w.calls()); n != 0 {
				t.Errorf("%d writes of an admit call reached the server", n)
			}
			fin, err := p.Finalize(ctx, &abi.FinalizeRequest{Object: abi.RawJSON(widgetObj), Config: writeConfig("delete")})
			if err != nil || !fin.Done || fin.Error != "" {
				t.Errorf("finalize that deletes: %v %+v", err, fin)
			}
			if calls := w.calls(); len(calls) != 1 || calls[0].fn != abi.HostDelete {
				t.Errorf("writes of the finalize call: %+v", calls)
			}
		})
	}
}

// TestWriteLimits checks that writes count in the host-call budget, that a
// write runs under the call's deadline, and that a server whose Objects
// cannot write refuses writes.
func TestWriteLimits(t *testing.T) {
	ctx := context.Background()
	w := &writer{}
	h := hosttest.NewHost(t, host.Options{Objects: w})
	perms := host.Permissions{Write: []string{"ConfigMap"}}

	budget := hosttest.LoadWith(t, h, "writer", host.Config{Permissions: perms, Limits: host.Limits{MaxHostCalls: 3}})
	_, err := budget.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: writeConfig("create", "object", configMap("cm"), "repeat", "4")})
	if !errors.Is(err, host.ErrHostCallLimit) {
		t.Errorf("4 writes with a budget of 3: %v, want %v", err, host.ErrHostCallLimit)
	}
	if n := len(w.calls()); n != 3 {
		t.Errorf("%d writes reached the server, want 3", n)
	}

	slow := hosttest.LoadWith(t, h, "writer", host.Config{Permissions: perms, Limits: host.Limits{CallTimeout: 300 * time.Millisecond}})
	start := time.Now()
	_, err = slow.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: writeConfig("patch", "name", "slow", "patch", `{}`)})
	if !errors.Is(err, host.ErrTimeout) || time.Since(start) > 10*time.Second {
		t.Errorf("a write past the deadline: %v after %v, want %v", err, time.Since(start), host.ErrTimeout)
	}
	if calls := w.calls(); len(calls) != 4 || calls[3].ctxErr == nil {
		t.Errorf("the slow write did not see its call's context end: %+v", calls[len(calls)-1])
	}

	readOnly := hosttest.LoadWith(t, hosttest.NewHost(t, host.Options{Objects: objects{}}), "writer", host.Config{Permissions: perms})
	resp, err := readOnly.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: writeConfig("create", "object", configMap("cm"))})
	if err != nil || !strings.Contains(resp.Error, "serves no object writes to plugins (reason Forbidden, code 403)") {
		t.Errorf("write on a read-only server: %v %q", err, resp.Error)
	}
}
