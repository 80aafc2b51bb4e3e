package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// noteCRD is a namespaced kind with a schema and a status subresource.
var noteCRD = testsupport.CRD{Kind: "Note", Status: true, Schema: `{"type":"object","properties":{
 "spec":{"type":"object","properties":{"size":{"type":"string"}}},
 "status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}`}

// newWriteService is an engine over a real Badger store serving Note.
func newWriteService(t *testing.T) *engine.Service {
	t.Helper()
	return newAdmittedWriteService(t, nil)
}

// newAdmittedWriteService is newWriteService with adm as its admission
// chain.
func newAdmittedWriteService(t *testing.T, adm engine.Admitter) *engine.Service {
	t.Helper()
	db := openTestDB(t)
	svc, err := engine.New(context.Background(), engine.Options{Store: db, Logger: quietLogger(), Admitter: adm})
	if err != nil {
		t.Fatal(err)
	}
	createCRDs(t, svc, noteCRD)
	return svc
}

// createCRDs creates the CRDs through the engine.
func createCRDs(t *testing.T, svc *engine.Service, crds ...testsupport.CRD) {
	t.Helper()
	for _, c := range crds {
		if _, err := svc.Create(context.Background(), kinds.CRDResource, c.Unstructured(), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD %s: %v", c.Name(), err)
		}
	}
}

func note(name, size, rv string) abi.RawJSON {
	meta := map[string]any{"name": name}
	if rv != "" {
		meta["resourceVersion"] = rv
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Note",
		"metadata": meta, "spec": map[string]any{"size": size}, "status": map[string]any{"state": "from-" + size}})
	return b
}

var noteRef = abi.WriteRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Note", Namespace: "default", Name: "n1"}

func withPatch(r abi.WriteRequest, sub, patch string) abi.WriteRequest {
	r.Subresource, r.Patch = sub, abi.RawJSON(patch)
	return r
}

// TestWriteObject runs every write through a real engine: validation,
// admission (which sees the plugin's user) and the store, and checks the
// Kubernetes reason and code of each failure.
func TestWriteObject(t *testing.T) {
	var users []string
	svc := newAdmittedWriteService(t, engine.AdmitterFuncs{ValidateFunc: func(_ context.Context, req *engine.AdmissionRequest) error {
		if req.User != nil {
			users = append(users, req.User.GetName()+"|"+strings.Join(req.User.GetGroups(), ","))
		}
		if req.Object != nil && req.Object.GetLabels()["deny"] == "yes" {
			return errors.New("labelled deny")
		}
		return nil
	}})
	o := NewObjects(svc, quietLogger())
	ctx := context.Background()

	var rv1, rv2 string
	steps := []struct {
		name       string
		fn         string
		req        func() abi.WriteRequest
		wantReason string
		wantCode   int
		wantMsg    string
		check      func(t *testing.T, obj abi.RawJSON)
	}{
		{name: "create defaults the namespace", fn: abi.HostCreate, req: func() abi.WriteRequest { return abi.WriteRequest{Object: note("n1", "small", "")} },
			check: func(t *testing.T, obj abi.RawJSON) {
				rv1 = obj.String("metadata", "resourceVersion")
				if obj.String("metadata", "namespace") != "default" || obj.String("metadata", "uid") == "" || rv1 == "" {
					t.Errorf("created %s", obj)
				}
				if obj.String("status", "state") != "" {
					t.Errorf("create kept the status of a kind with a status subresource: %s", obj)
				}
			}},
		{name: "create again", fn: abi.HostCreate, req: func() abi.WriteRequest { return abi.WriteRequest{Object: note("n1", "small", "")} },
			wantReason: "AlreadyExists", wantCode: 409},
		{name: "update", fn: abi.HostUpdate, req: func() abi.WriteRequest { return abi.WriteRequest{Object: note("n1", "large", rv1)} },
			check: func(t *testing.T, obj abi.RawJSON) {
				rv2 = obj.String("metadata", "resourceVersion")
				if obj.String("spec", "size") != "large" || obj.String("status", "state") != "" {
					t.Errorf("updated %s", obj)
				}
			}},
		{name: "update with a stale resourceVersion", fn: abi.HostUpdate, req: func() abi.WriteRequest { return abi.WriteRequest{Object: note("n1", "medium", rv1)} },
			wantReason: "Conflict", wantCode: 409},
		{name: "update status without a resourceVersion", fn: abi.HostUpdate, req: func() abi.WriteRequest {
			return abi.WriteRequest{Object: note("n1", "ignored", ""), Subresource: "status"}
		}, wantReason: "Invalid", wantCode: 422, wantMsg: "metadata.resourceVersion: Invalid value: \"\": must be specified for an update"},
		{name: "update status", fn: abi.HostUpdate, req: func() abi.WriteRequest {
			return abi.WriteRequest{Object: note("n1", "ignored", rv2), Subresource: "status"}
		}, check: func(t *testing.T, obj abi.RawJSON) {
			if obj.String("status", "state") != "from-ignored" || obj.String("spec", "size") != "large" {
				t.Errorf("status update gave %s", obj)
			}
		}},
		{name: "merge patch", fn: abi.HostPatch, req: func() abi.WriteRequest {
			return withPatch(noteRef, "", `{"metadata":{"labels":{"a":"b"}},"spec":{"size":"xl"}}`)
		},
			check: func(t *testing.T, obj abi.RawJSON) {
				if obj.String("spec", "size") != "xl" || obj.String("metadata", "labels", "a") != "b" || obj.String("status", "state") != "from-ignored" {
					t.Errorf("patched %s", obj)
				}
			}},
		{name: "merge patch of the status", fn: abi.HostPatch, req: func() abi.WriteRequest { return withPatch(noteRef, "status", `{"status":{"state":"Ready"}}`) },
			check: func(t *testing.T, obj abi.RawJSON) {
				if obj.String("status", "state") != "Ready" || obj.String("spec", "size") != "xl" {
					t.Errorf("status patch gave %s", obj)
				}
			}},
		{name: "invalid against the schema", fn: abi.HostPatch, req: func() abi.WriteRequest { return withPatch(noteRef, "", `{"spec":{"size":5}}`) },
			wantReason: "Invalid", wantCode: 422, wantMsg: "spec.size"},
		{name: "denied by admission", fn: abi.HostPatch, req: func() abi.WriteRequest { return withPatch(noteRef, "", `{"metadata":{"labels":{"deny":"yes"}}}`) },
			wantReason: "Forbidden", wantCode: 403, wantMsg: "labelled deny"},
		{name: "patch of a missing object", fn: abi.HostPatch, req: func() abi.WriteRequest {
			r := withPatch(noteRef, "", `{}`)
			r.Name = "missing"
			return r
		}, wantReason: "NotFound", wantCode: 404},
		{name: "unserved kind", fn: abi.HostDelete, req: func() abi.WriteRequest {
			return abi.WriteRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Gizmo", Name: "g"}
		}, wantReason: "NotFound", wantCode: 404, wantMsg: "Gizmo"},
		{name: "delete with a wrong uid", fn: abi.HostDelete, req: func() abi.WriteRequest { r := noteRef; r.UID = "not-the-uid"; return r },
			wantReason: "Conflict", wantCode: 409},
		{name: "delete", fn: abi.HostDelete, req: func() abi.WriteRequest { return noteRef },
			check: func(t *testing.T, obj abi.RawJSON) {
				if obj.String("metadata", "name") != "n1" {
					t.Errorf("deleted %s", obj)
				}
				if _, err := svc.Get(ctx, noteGVR, "default", "n1", metav1.GetOptions{}); !isNotFound(err) {
					t.Errorf("after delete, get: %v", err)
				}
			}},
		{name: "delete again", fn: abi.HostDelete, req: func() abi.WriteRequest { return noteRef }, wantReason: "NotFound", wantCode: 404},
	}
	for _, st := range steps {
		resp := o.WriteObject(ctx, "p", st.fn, st.req())
		if st.wantReason != "" {
			if resp.Reason != st.wantReason || resp.Code != st.wantCode || resp.Error == "" || !strings.Contains(resp.Error, st.wantMsg) || resp.Object != nil {
				t.Errorf("%s: %+v, want reason %s code %d and %q", st.name, resp, st.wantReason, st.wantCode, st.wantMsg)
			}
			continue
		}
		if resp.Error != "" {
			t.Fatalf("%s: %s (%s %d)", st.name, resp.Error, resp.Reason, resp.Code)
		}
		st.check(t, resp.Object)
	}
	want := "system:setpoint:plugin:p|" + PluginGroup + ",system:authenticated"
	if len(users) == 0 || slices.ContainsFunc(users, func(u string) bool { return u != want }) {
		t.Errorf("admission saw users %q, want only %s", users, want)
	}
}

var noteGVR = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "notes"}

// TestWriteObjectCancelled checks that a write whose call is over is not
// made.
func TestWriteObjectCancelled(t *testing.T) {
	svc := newWriteService(t)
	o := NewObjects(svc, quietLogger())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp := o.WriteObject(ctx, "p", abi.HostCreate, abi.WriteRequest{Object: note("late", "small", "")})
	if resp.Error == "" {
		t.Fatalf("a cancelled write succeeded: %s", resp.Object)
	}
	if _, err := svc.Get(context.Background(), noteGVR, "default", "late", metav1.GetOptions{}); !isNotFound(err) {
		t.Errorf("a cancelled write was stored: %v", err)
	}
}

// TestWritePermissions checks how spec.permissions.write resolves: kinds by
// "plural.group" like read, "events" the emit_event permission alone, "*"
// every kind and events, and an unknown kind the same error read gives.
func TestWritePermissions(t *testing.T) {
	svc := newWriteService(t)
	tests := []struct {
		name       string
		perms      Permissions
		wantWrite  []string
		wantEvents bool
		wantErr    string
	}{
		{"kinds", Permissions{Write: []string{"notes.example.setpoint.dev", "namespaces"}}, []string{"Note.example.setpoint.dev", "Namespace"}, false, ""},
		{"events only", Permissions{Write: []string{"events"}}, nil, true, ""},
		{"kinds and events", Permissions{Write: []string{"events", "notes.example.setpoint.dev"}}, []string{"Note.example.setpoint.dev"}, true, ""},
		{"everything", Permissions{Write: []string{"*"}}, []string{"*"}, true, ""},
		{"unknown kind", Permissions{Write: []string{"gizmos.example.setpoint.dev"}}, nil, false, `spec.permissions.write: plugins: resource not served: "gizmos.example.setpoint.dev"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Spec{Permissions: tt.perms}.hostConfig(svc)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				_, readErr := Spec{Permissions: Permissions{Read: tt.perms.Write}}.hostConfig(svc)
				if readErr == nil || strings.TrimPrefix(readErr.Error(), "spec.permissions.read") != strings.TrimPrefix(err.Error(), "spec.permissions.write") {
					t.Errorf("write error %q differs from read's %q", err, readErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Write, tt.wantWrite) || cfg.Events != tt.wantEvents {
				t.Errorf("Write %q Events %v, want %q %v", cfg.Write, cfg.Events, tt.wantWrite, tt.wantEvents)
			}
		})
	}
}
