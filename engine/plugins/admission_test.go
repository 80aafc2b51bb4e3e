package plugins

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// admitFunc is a Caller whose admit export is a Go function.
type admitFunc func(*abi.AdmissionRequest) (*abi.AdmissionResponse, error)

func (f admitFunc) Admit(_ context.Context, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	return f(req)
}
func (admitFunc) Reconcile(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return nil, errors.New("no reconcile")
}
func (admitFunc) Finalize(context.Context, *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	return nil, errors.New("no finalize")
}

var widgets = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}

func widgetRequest(op engine.Operation) *engine.AdmissionRequest {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"},
		"spec":     map[string]any{"name": "w", "size": "small"},
	}}
	return &engine.AdmissionRequest{
		Operation: op, Resource: widgets, Kind: widgets.GroupVersion().WithKind("Widget"),
		Namespace: "default", Name: "w", Object: obj,
	}
}

// leaseRequest is the update of a leader election's Lease.
func leaseRequest() *engine.AdmissionRequest {
	gvr := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": "setpoint-plugin.widget", "namespace": "default"},
		"spec":     map[string]any{"holderIdentity": "a", "leaseDurationSeconds": int64(15)},
	}}
	return &engine.AdmissionRequest{
		Operation: engine.OpUpdate, Resource: gvr, Kind: gvr.GroupVersion().WithKind("Lease"),
		Namespace: "default", Name: "setpoint-plugin.widget", Object: obj,
	}
}

// TestAdmitterLeasesPassTheStartupGate: a Lease write is not held while the
// stored Plugins load, so that a replica starting up renews its leases.
func TestAdmitterLeasesPassTheStartupGate(t *testing.T) {
	a := NewAdmitter(quietLogger()) // its gate stays shut
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := a.Validate(ctx, leaseRequest()); err != nil {
		t.Fatalf("lease write held or refused: %v", err)
	}
	if err := a.Validate(ctx, widgetRequest(engine.OpCreate)); err == nil {
		t.Fatal("a Widget write passed the shut startup gate; the test proves nothing")
	}
}

func openAdmitter(bs ...*admissionBinding) *Admitter {
	a := NewAdmitter(quietLogger())
	g := &startupGate{done: make(chan struct{})}
	close(g.done)
	a.gate.Store(g)
	a.set(bs)
	return a
}

func TestAdmitter(t *testing.T) {
	allow := admitFunc(func(*abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
		return &abi.AdmissionResponse{Allowed: true}, nil
	})
	deny := func(code int) admitFunc {
		return func(*abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
			return &abi.AdmissionResponse{Message: "no widgets today", Code: code}, nil
		}
	}
	trap := admitFunc(func(*abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
		return nil, errors.New(`plugin "p" admit: host: timeout`)
	})
	patch := func(p string) admitFunc {
		return func(*abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
			return &abi.AdmissionResponse{Allowed: true, Patch: abi.RawJSON(p)}, nil
		}
	}
	tests := []struct {
		name     string
		binding  admissionBinding
		req      *engine.AdmissionRequest
		mutating bool
		wantCode int32  // 0: allowed
		wantMsg  string // in the error, or in the mutated object
	}{
		{name: "validating denial keeps the plugin's code", binding: admissionBinding{caller: deny(422), resources: []string{"widgets.example.setpoint.dev"}},
			req: widgetRequest(engine.OpCreate), wantCode: 422, wantMsg: `admission plugin "p" denied the request: no widgets today`},
		{name: "denial without a code is 403", binding: admissionBinding{caller: deny(0), resources: []string{"*"}},
			req: widgetRequest(engine.OpCreate), wantCode: 403},
		{name: "other operation not admitted", binding: admissionBinding{caller: deny(422), resources: []string{"*"}, ops: []string{"DELETE"}},
			req: widgetRequest(engine.OpCreate)},
		{name: "other resource not admitted", binding: admissionBinding{caller: deny(422), resources: []string{"gadgets.example.setpoint.dev"}},
			req: widgetRequest(engine.OpCreate)},
		{name: "subresource needs its own rule", binding: admissionBinding{caller: deny(422), resources: []string{"*"}},
			req: func() *engine.AdmissionRequest {
				r := widgetRequest(engine.OpUpdate)
				r.Subresource = "status"
				return r
			}()},
		{name: "Plugin objects are never admitted by plugins", binding: admissionBinding{caller: deny(422), resources: []string{"*", "plugins.setpoint.dev"}},
			req: func() *engine.AdmissionRequest { r := widgetRequest(engine.OpCreate); r.Resource = Resource; return r }()},
		{name: "Leases are never admitted by plugins", binding: admissionBinding{caller: trap, resources: []string{"*", "leases.coordination.k8s.io"}},
			req: leaseRequest()},
		{name: "Leases are never mutated by plugins", binding: admissionBinding{caller: trap, resources: []string{"*", "leases.coordination.k8s.io"}, mutating: true, privileged: true},
			req: leaseRequest(), mutating: true},
		{name: "failure with Fail denies", binding: admissionBinding{caller: trap, resources: []string{"*"}},
			req: widgetRequest(engine.OpCreate), wantCode: 500, wantMsg: `admission plugin "p" failed (failurePolicy Fail): plugin "p" admit: host: timeout`},
		{name: "failure with Ignore allows", binding: admissionBinding{caller: trap, resources: []string{"*"}, ignore: true},
			req: widgetRequest(engine.OpCreate)},
		{name: "mutating patch applies", binding: admissionBinding{caller: patch(`[{"op":"add","path":"/metadata/labels","value":{"team":"x"}}]`), resources: []string{"*"}, mutating: true},
			req: widgetRequest(engine.OpCreate), mutating: true, wantMsg: `"team":"x"`},
		{name: "mutation of the name is a failure", binding: admissionBinding{caller: patch(`[{"op":"replace","path":"/metadata/name","value":"other"}]`), resources: []string{"*"}, mutating: true},
			req: widgetRequest(engine.OpCreate), mutating: true, wantCode: 500, wantMsg: "changed the object's"},
		{name: "invalid patch is a failure", binding: admissionBinding{caller: patch(`{"op":"add"}`), resources: []string{"*"}, mutating: true},
			req: widgetRequest(engine.OpCreate), mutating: true, wantCode: 500, wantMsg: "not a JSON patch"},
		{name: "validating plugin is not called to mutate", binding: admissionBinding{caller: deny(422), resources: []string{"*"}},
			req: widgetRequest(engine.OpCreate), mutating: true},
		{name: "allowed", binding: admissionBinding{caller: allow, resources: []string{"widgets.example.setpoint.dev"}},
			req: widgetRequest(engine.OpDelete)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.binding
			b.plugin = "p"
			a := openAdmitter(&b)
			var err error
			if tt.mutating {
				err = a.Mutate(context.Background(), tt.req, func() {})
			} else {
				err = a.Validate(context.Background(), tt.req)
			}
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("denied: %v", err)
				}
				if tt.wantMsg != "" {
					doc, _ := tt.req.Object.MarshalJSON()
					if !strings.Contains(string(doc), tt.wantMsg) {
						t.Errorf("object %s lacks %s", doc, tt.wantMsg)
					}
				}
				return
			}
			var st apierrors.APIStatus
			if !errors.As(err, &st) {
				t.Fatalf("error %v is not a Status", err)
			}
			if st.Status().Code != tt.wantCode || !strings.Contains(st.Status().Message, tt.wantMsg) {
				t.Errorf("got %d %q, want %d with %q", st.Status().Code, st.Status().Message, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestAdmitterPassesDryRun(t *testing.T) {
	var seen bool
	a := openAdmitter(&admissionBinding{plugin: "p", resources: []string{"*"}, config: map[string]string{"k": "v"},
		caller: admitFunc(func(req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
			seen = req.DryRun && req.Config["k"] == "v" && req.Operation == abi.Create && req.Object.String("metadata", "name") == "w"
			return &abi.AdmissionResponse{Allowed: true}, nil
		})})
	req := widgetRequest(engine.OpCreate)
	req.DryRun = true
	if err := a.Validate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if !seen {
		t.Error("the plugin did not get the dry-run request with its config")
	}
}

func TestValidDigest(t *testing.T) {
	tests := []struct {
		name, digest string
		want         bool
	}{
		{"sha256", "sha256:" + strings.Repeat("ab", 32), true},
		{"upper case", "sha256:" + strings.Repeat("AB", 32), false},
		{"short", "sha256:abc", false},
		{"other algorithm", "sha512:" + strings.Repeat("ab", 32), false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validDigest(tt.digest); got != tt.want {
				t.Errorf("validDigest(%q) = %v", tt.digest, got)
			}
		})
	}
}

// TestAdmitterHammer swaps bindings while writes are admitted: every write
// sees one consistent set of bindings, under -race.
func TestAdmitterHammer(t *testing.T) {
	denyAll := &admissionBinding{plugin: "deny", resources: []string{"*"},
		caller: admitFunc(func(*abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
			return &abi.AdmissionResponse{Code: 422, Message: "no"}, nil
		})}
	label := &admissionBinding{plugin: "label", resources: []string{"*"}, mutating: true,
		caller: admitFunc(func(*abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
			return &abi.AdmissionResponse{Allowed: true, Patch: abi.RawJSON(`[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]`)}, nil
		})}
	a := openAdmitter()
	ctx := context.Background()
	var wg, swapper sync.WaitGroup
	stop := make(chan struct{})
	swapper.Add(1)
	go func() {
		defer swapper.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			switch i % 3 {
			case 0:
				a.set([]*admissionBinding{denyAll})
			case 1:
				a.set([]*admissionBinding{label})
			default:
				a.set(nil)
			}
		}
	}()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				req := widgetRequest(engine.OpCreate)
				if err := a.Mutate(ctx, req, func() {}); err != nil {
					t.Errorf("mutate: %v", err)
					return
				}
				if err := a.Validate(ctx, req); err != nil && !strings.Contains(err.Error(), `"deny" denied`) {
					t.Errorf("validate: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	swapper.Wait()
}

// Mutate calls changing only before a mutating plugin's answer
// changes the object, while the object is still as it was: not for a
// mutating plugin that answers without a patch, nor for validating ones.
func TestAdmitterMutateNotify(t *testing.T) {
	allow := admitFunc(func(*abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
		return &abi.AdmissionResponse{Allowed: true}, nil
	})
	label := admitFunc(func(*abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
		return &abi.AdmissionResponse{Allowed: true, Patch: abi.RawJSON(`[{"op":"add","path":"/metadata/labels","value":{"team":"x"}}]`)}, nil
	})
	tests := []struct {
		name     string
		bindings []*admissionBinding
		want     int // calls of changing
	}{
		{name: "no bindings", want: 0},
		{name: "validating plugin", bindings: []*admissionBinding{{plugin: "v", caller: label, resources: []string{"*"}}}, want: 0},
		{name: "mutating plugin without a patch", bindings: []*admissionBinding{{plugin: "m", caller: allow, resources: []string{"*"}, mutating: true}}, want: 0},
		{name: "mutating plugin of another resource", bindings: []*admissionBinding{{plugin: "m", caller: label, resources: []string{"gadgets.example.setpoint.dev"}, mutating: true}}, want: 0},
		{name: "mutating plugin with a patch", bindings: []*admissionBinding{{plugin: "m", caller: label, resources: []string{"*"}, mutating: true}}, want: 1},
		{name: "two mutating plugins", bindings: []*admissionBinding{
			{plugin: "a", caller: allow, resources: []string{"*"}, mutating: true},
			{plugin: "b", caller: label, resources: []string{"*"}, mutating: true},
		}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := openAdmitter(tt.bindings...)
			req := widgetRequest(engine.OpCreate)
			calls := 0
			err := a.Mutate(context.Background(), req, func() {
				calls++
				if req.Object.GetLabels() != nil {
					t.Errorf("changing called after the change: labels %v", req.Object.GetLabels())
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if calls != tt.want {
				t.Errorf("changing called %d times, want %d", calls, tt.want)
			}
			if changed := req.Object.GetLabels()["team"] == "x"; changed != (tt.want > 0) {
				t.Errorf("labels %v after %d calls of changing", req.Object.GetLabels(), calls)
			}
		})
	}
}
