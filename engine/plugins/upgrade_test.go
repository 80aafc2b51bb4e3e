package plugins

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// servingHost is a fakeHost whose plugins answer with the digest they run:
// admit denies a Note without the label ok ("denied by DIGEST"), reconcile
// provisions one Gizmo per Note whose spec names the digest, finalize is
// done at once.
type servingHost struct{ *fakeHost }

func (h servingHost) Caller(name string) Caller { return servingCaller{h: h.fakeHost, plugin: name} }

type servingCaller struct {
	h      *fakeHost
	plugin string
}

func (c servingCaller) digest() string {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	return c.h.current[c.plugin]
}

func (c servingCaller) Admit(_ context.Context, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	if req.Object.String("metadata", "labels", "ok") != "" {
		return &abi.AdmissionResponse{Allowed: true}, nil
	}
	return &abi.AdmissionResponse{Code: 422, Message: "denied by " + c.digest()}, nil
}

func (c servingCaller) Reconcile(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return &abi.ReconcileResponse{Children: []abi.RawJSON{abi.RawJSON(fmt.Sprintf(
		`{"apiVersion":"example.setpoint.dev/v1","kind":"Gizmo","metadata":{"name":"%s-g"},"spec":{"digest":%q}}`,
		req.Object.String("metadata", "name"), c.digest()))}}, nil
}

func (servingCaller) Finalize(context.Context, *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	return &abi.FinalizeResponse{Done: true}, nil
}

// upgradeEnv is the plugin side of a server: the engine serving Notes and
// Gizmos with the manager's admission chain, the manager and the binding
// controllers.
type upgradeEnv struct {
	svc     *engine.Service
	host    *fakeHost
	modules *Modules
}

func newUpgradeEnv(t *testing.T) *upgradeEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db := openTestDB(t)
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for _, def := range []string{noteCRD, gizmoCRD} {
		crd := &unstructured.Unstructured{}
		if err := crd.UnmarshalJSON([]byte(def)); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Create(ctx, kinds.CRDResource, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h := &fakeHost{current: map[string]string{}}
	ctls := controller.NewManager(controller.ManagerOptions{Logger: quietLogger()})
	e := &upgradeEnv{svc: svc, host: h, modules: NewModules(db)}
	m, err := New(Options{Service: svc, Modules: e.modules, Host: servingHost{h}, Logger: quietLogger(), Controllers: ctls, StatusInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	svc.SetAdmitter(m.Admitter())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := m.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	wg.Go(func() {
		if err := ctls.Run(ctx); err != nil {
			t.Errorf("controllers: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitServed(t, svc)
	return e
}

func (e *upgradeEnv) put(t *testing.T, wasm string) string {
	t.Helper()
	d := digestOf([]byte(wasm))
	if _, err := e.modules.Put(context.Background(), d, []byte(wasm)); err != nil {
		t.Fatal(err)
	}
	return d
}

// upgradePlugin reconciles Notes (owning Gizmos) and validates their
// creation with failurePolicy Fail, within 512 pages.
func upgradePlugin(digest string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": "policy"},
		"spec": map[string]any{
			"module":    map[string]any{"digest": digest},
			"reconcile": map[string]any{"for": "notes.example.setpoint.dev", "owns": []any{"gizmos.example.setpoint.dev"}},
			"admission": []any{map[string]any{"resources": []any{"notes.example.setpoint.dev"}, "operations": []any{"CREATE"}, "type": "Validating", "failurePolicy": "Fail"}},
			"limits":    map[string]any{"memoryPages": int64(512)},
		},
	}}
}

func (e *upgradeEnv) createNote(name string, ok bool) error {
	labels := map[string]any{}
	if ok {
		labels["ok"] = "yes"
	}
	n := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Note",
		"metadata": map[string]any{"name": name, "namespace": "default", "labels": labels},
		"spec":     map[string]any{"size": "small"},
	}}
	_, err := e.svc.Create(context.Background(), notes, n, metav1.CreateOptions{})
	return err
}

// gizmoDigest is the digest the Gizmo of note was provisioned by, "" when
// it does not exist.
func (e *upgradeEnv) gizmoDigest(note string) string {
	g, err := e.svc.Get(context.Background(), gizmos, "default", note+"-g", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	d, _, _ := unstructured.NestedString(g.Object, "spec", "digest")
	return d
}

func (e *upgradeEnv) point(t *testing.T, digest string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"module":{"digest":%q}}}`, digest)
	if _, err := e.svc.Patch(context.Background(), Resource, "", "policy", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A module that cannot serve every binding of the Plugin, or that the host
// refuses, never replaces the one serving: admission, reconcile and
// finalize go on with the old module, and the status names both digests
// the right way round.
func TestFailedUpgradeKeepsOldModuleServing(t *testing.T) {
	const v1 = "exports:admit,reconcile,finalize;v1"
	for _, tc := range []struct {
		name, module, reason, says string
	}{
		{"missing admit", "exports:reconcile,finalize;v2", ReasonMissingExport, "does not export admit, which spec.admission binds"},
		{"missing reconcile", "exports:admit;v2", ReasonMissingExport, "does not export reconcile, which spec.reconcile binds"},
		{"missing finalize while objects carry it", "exports:admit,reconcile;v2", ReasonMissingExport,
			"does not export finalize, and 1 object of notes.example.setpoint.dev carrying its finalizer setpoint.dev/policy would never finish deleting"},
		{"trap in init", "inittrap;exports:admit,reconcile,finalize", ReasonInvalidModule, "trap"},
		{"ABI version mismatch", "abi99;exports:admit,reconcile,finalize", ReasonInvalidModule, "ABI version 99"},
		{"over the memory cap", "big;exports:admit,reconcile,finalize", ReasonInvalidModule, "exceeds the limit of 512 pages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newUpgradeEnv(t)
			ctx := context.Background()
			old, next := e.put(t, v1), e.put(t, tc.module)
			if _, err := e.svc.Create(ctx, Resource, upgradePlugin(old), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, e.svc, "v1 loaded", func(st map[string]any) bool { return st["phase"] == PhaseLoaded && st["loadedDigest"] == old })
			if err := e.createNote("first", true); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the first note's gizmo", func() (bool, string) {
				return e.gizmoDigest("first") == old, e.gizmoDigest("first")
			})

			e.point(t, next)
			var msg string
			waitStatus(t, e.svc, "the upgrade refused", func(st map[string]any) bool {
				msg = conditionMessage(st, ConditionLoaded)
				return st["phase"] == PhaseFailed && conditionReason(st, ConditionLoaded) == tc.reason && st["loadedDigest"] == old
			})
			for _, want := range []string{tc.says, "module " + old + " keeps serving"} {
				if !strings.Contains(msg, want) {
					t.Errorf("Loaded message %q lacks %q", msg, want)
				}
			}
			if !strings.Contains(msg, next) {
				t.Errorf("Loaded message %q does not name the refused module %s", msg, next)
			}
			if strings.Contains(msg, next+" keeps serving") {
				t.Errorf("Loaded message %q says the refused module serves", msg)
			}
			e.host.mu.Lock()
			serving := e.host.current["policy"]
			e.host.mu.Unlock()
			if serving != old {
				t.Fatalf("the host serves %s after the refused upgrade, want %s", serving, old)
			}

			// Admission still runs the old module, failurePolicy Fail.
			err := e.createNote("unlabelled", false)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "denied by "+old) {
				t.Fatalf("a note without the label after the refused upgrade: %v, want the old module's denial", err)
			}
			// Reconcile still runs the old module.
			if err := e.createNote("second", true); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the second note's gizmo from the old module", func() (bool, string) {
				return e.gizmoDigest("second") == old, e.gizmoDigest("second")
			})
			// And so does finalize: deleting a note finishes.
			if err := e.svc.Delete(ctx, notes, "default", "first", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the first note deleted through the old module's finalize", func() (bool, string) {
				_, err := e.svc.Get(ctx, notes, "default", "first", metav1.GetOptions{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
		})
	}
}

// A module without finalize may replace one with it once no object carries
// the finalizer.
func TestUpgradeDropsFinalizeWhenNoObjectCarriesIt(t *testing.T) {
	e := newUpgradeEnv(t)
	old, next := e.put(t, "exports:admit,reconcile,finalize;v1"), e.put(t, "exports:admit,reconcile;v2")
	if _, err := e.svc.Create(context.Background(), Resource, upgradePlugin(old), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.svc, "v1 loaded", func(st map[string]any) bool { return st["phase"] == PhaseLoaded && st["loadedDigest"] == old })
	e.point(t, next)
	waitStatus(t, e.svc, "v2 loaded", func(st map[string]any) bool { return st["phase"] == PhaseLoaded && st["loadedDigest"] == next })
}

// An admission rule with failurePolicy Fail that no module can serve is
// never dropped: writes it covers are refused, naming the plugin and why,
// whether no module was uploaded, the module lacks admit, or it was refused.
func TestUnservableFailBindingRefusesWrites(t *testing.T) {
	for _, tc := range []struct{ name, module, why string }{
		{"module not uploaded", "", "was not uploaded"},
		{"module without admit", "exports:reconcile;v1", "does not export admit"},
		{"module refused", "inittrap;v1", "trap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newUpgradeEnv(t)
			digest := digestOf([]byte("never uploaded"))
			if tc.module != "" {
				digest = e.put(t, tc.module)
			}
			if _, err := e.svc.Create(context.Background(), Resource, upgradePlugin(digest), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, e.svc, "the plugin failing", func(st map[string]any) bool {
				return st["phase"] == PhaseFailed || st["phase"] == PhasePending
			})
			err := e.createNote("labelled", true)
			if err == nil || !strings.Contains(err.Error(), `admission plugin "policy" failed (failurePolicy Fail)`) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("a write the unservable binding covers: %v, want a refusal naming the plugin and %q", err, tc.why)
			}
		})
	}
}

func conditionMessage(st map[string]any, typ string) string {
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["message"].(string)
			return s
		}
	}
	return ""
}
