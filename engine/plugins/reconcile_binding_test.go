package plugins

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

var gizmoCRD = testsupport.CRD{Kind: "Gizmo", Status: true}

var (
	notes  = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "notes"}
	gizmos = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "gizmos"}
)

// reconcileHost is a fakeHost whose modules export reconcile: each plugin
// wants one Gizmo per Note, named <note>-<plugin>, and its calls are
// counted.
type reconcileHost struct {
	*fakeHost
	slow     string // the plugin whose modules take half a second to load
	finalize bool   // the modules export finalize, which is done at once
	callsMu  sync.Mutex
	calls    map[string]int // plugin name → reconcile calls
	// gate, when set, is called at the start of every reconcile call; an
	// error fails the call.
	gate func(context.Context) error
}

func (h *reconcileHost) Stage(ctx context.Context, name string, wasm []byte, digest string, cfg Config) (Candidate, error) {
	if name == h.slow {
		time.Sleep(500 * time.Millisecond)
	}
	c, err := h.fakeHost.Stage(ctx, name, wasm, digest, cfg)
	if err != nil {
		return nil, err
	}
	c.(*fakeCandidate).exports = Exports{Reconcile: true, Finalize: h.finalize}
	return c, nil
}

func (h *reconcileHost) Caller(name string) Caller { return reconcileCaller{h: h, plugin: name} }

func (h *reconcileHost) callsOf(name string) int {
	h.callsMu.Lock()
	defer h.callsMu.Unlock()
	return h.calls[name]
}

type reconcileCaller struct {
	admitFunc
	h      *reconcileHost
	plugin string
}

func (c reconcileCaller) Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	if c.h.gate != nil {
		if err := c.h.gate(ctx); err != nil {
			return nil, err
		}
	}
	c.h.callsMu.Lock()
	c.h.calls[c.plugin]++
	c.h.callsMu.Unlock()
	return &abi.ReconcileResponse{Children: []abi.RawJSON{abi.RawJSON(fmt.Sprintf(
		`{"apiVersion":"example.setpoint.dev/v1","kind":"Gizmo","metadata":{"name":"%s-%s"},"spec":{"size":"small"}}`,
		req.Object.String("metadata", "name"), c.plugin))}}, nil
}

func (reconcileCaller) Finalize(context.Context, *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	return &abi.FinalizeResponse{Done: true}, nil
}

// reconcileProcess is one run of the server's plugin side with its
// controllers running: the engine serving Note and Gizmo, the host, the
// Plugin manager and the controller manager of the reconcile bindings.
type reconcileProcess struct {
	svc  *engine.Service
	host *reconcileHost
	ctls *controller.Manager
	stop func()
}

// startReconcileProcess starts a process over db; the modules of the
// plugin slow take half a second to load.
func startReconcileProcess(t *testing.T, db store.Store, slow string) *reconcileProcess {
	return startReconcileHost(t, db, &reconcileHost{fakeHost: &fakeHost{current: map[string]string{}}, slow: slow, calls: map[string]int{}})
}

func startReconcileHost(t *testing.T, db store.Store, h *reconcileHost) *reconcileProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range []testsupport.CRD{noteCRD, gizmoCRD} {
		if _, err := svc.Create(ctx, kinds.CRDResource, crd.Unstructured(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	ctls := controller.NewManager(controller.ManagerOptions{Logger: quietLogger()})
	m, err := New(Options{Service: svc, Modules: NewModules(db), Host: h, Logger: quietLogger(), Controllers: ctls, StatusInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
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
	waitServed(t, svc)
	return &reconcileProcess{svc: svc, host: h, ctls: ctls, stop: func() { cancel(); wg.Wait() }}
}

// reconcilePlugin is a Plugin that reconciles Notes and owns Gizmos.
func reconcilePlugin(name, digest string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"module":    map[string]any{"digest": digest},
			"reconcile": map[string]any{"for": "notes.example.setpoint.dev", "owns": []any{"gizmos.example.setpoint.dev"}},
		},
	}}
}

// pluginCondition returns the status, reason and message of a Plugin's
// condition typ.
func pluginCondition(t *testing.T, svc *engine.Service, name, typ string) (string, string, string) {
	t.Helper()
	obj, err := svc.Get(context.Background(), Resource, "", name, metav1.GetOptions{})
	if err != nil {
		return "", "", err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
		}
	}
	return "", "", ""
}

// waitConflict waits until the Plugin name says another Plugin, first,
// reconciles its kind.
func waitConflict(t *testing.T, svc *engine.Service, name, first string) {
	t.Helper()
	testsupport.Poll(t, 10*time.Second, name+" reports the conflict", func() (bool, string) {
		ls, lr, lm := pluginCondition(t, svc, name, ConditionLoaded)
		rs, _, rm := pluginCondition(t, svc, name, controller.ConditionReady)
		ok := ls == "False" && lr == ReasonReconcileConflict && strings.Contains(lm, fmt.Sprintf("Plugin %q", first)) &&
			rs == "False" && strings.Contains(rm, fmt.Sprintf("Plugin %q", first))
		return ok, fmt.Sprintf("Loaded=%s %s %q, Ready=%s %q", ls, lr, lm, rs, rm)
	})
}

func gizmoUID(svc *engine.Service, name string) (string, bool) {
	g, err := svc.Get(context.Background(), gizmos, "default", name, metav1.GetOptions{})
	if err != nil {
		return "", false
	}
	return string(g.GetUID()), true
}

func createNote(t *testing.T, svc *engine.Service, name string) {
	t.Helper()
	n := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Note",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"size": "small"},
	}}
	if _, err := svc.Create(context.Background(), notes, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Two Plugins that reconcile one kind would each take the other's children
// (controlled by the same object) for their own and delete them, in a hot
// loop. Only the Plugin created first runs its controller; the other says
// why in its status and takes over once the first is gone. A hot swap of
// the first changes nothing.
func TestManagerRunsOneReconcilerPerKind(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	p := startReconcileProcess(t, db, "")
	defer p.stop()
	modules := NewModules(db)
	one, two := []byte("module one"), []byte("module two")
	for _, m := range [][]byte{one, two} {
		if _, err := modules.Put(ctx, digestOf(m), m); err != nil {
			t.Fatal(err)
		}
	}
	// "old" is created a second before "new" (creationTimestamp has
	// seconds), so that it comes first by age, not by name.
	if _, err := p.svc.Create(ctx, Resource, reconcilePlugin("old", digestOf(one)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 10*time.Second, "old's controller runs", func() (bool, string) {
		names := p.ctls.Names()
		return slices.Equal(names, []string{"old"}), fmt.Sprint(names)
	})
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	if _, err := p.svc.Create(ctx, Resource, reconcilePlugin("new", digestOf(one)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConflict(t, p.svc, "new", "old")
	createNote(t, p.svc, "n1")
	testsupport.Poll(t, 10*time.Second, "old's child", func() (bool, string) {
		_, ok := gizmoUID(p.svc, "n1-old")
		return ok, "no n1-old"
	})
	uid, _ := gizmoUID(p.svc, "n1-old")

	// A hot swap of old keeps it reconciling, and new waiting.
	cur, err := p.svc.Get(ctx, Resource, "", "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cur.Object, digestOf(two), "spec", "module", "digest")
	if _, err := p.svc.Update(ctx, Resource, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 10*time.Second, "old swapped", func() (bool, string) {
		obj, err := p.svc.Get(ctx, Resource, "", "old", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		d, _, _ := unstructured.NestedString(obj.Object, "status", "loadedDigest")
		st, _, _ := pluginCondition(t, p.svc, "old", ConditionLoaded)
		return d == digestOf(two) && st == "True", d + " Loaded=" + st
	})
	time.Sleep(time.Second)
	if names := p.ctls.Names(); !slices.Equal(names, []string{"old"}) {
		t.Errorf("controllers after old's swap: %v, want [old]", names)
	}
	waitConflict(t, p.svc, "new", "old")
	if got, ok := gizmoUID(p.svc, "n1-old"); got != uid {
		t.Errorf("n1-old: uid %q (exists %v), want %q: it was deleted", got, ok, uid)
	}
	if _, ok := gizmoUID(p.svc, "n1-new"); ok || p.host.callsOf("new") != 0 {
		t.Errorf("new reconciled while old does: %d calls, n1-new exists %v", p.host.callsOf("new"), ok)
	}

	// Once old is gone, new takes over (it retries with backoff, at most
	// 10 s apart).
	if err := p.svc.Delete(ctx, Resource, "", "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 20*time.Second, "new takes over", func() (bool, string) {
		st, r, msg := pluginCondition(t, p.svc, "new", ConditionLoaded)
		_, ok := gizmoUID(p.svc, "n1-new")
		names := p.ctls.Names()
		return st == "True" && ok && slices.Equal(names, []string{"new"}), fmt.Sprintf("Loaded=%s %s %q, n1-new %v, controllers %v", st, r, msg, ok, names)
	})
}

// After a restart the Plugin that loads first may be the later one; it must
// not run, even briefly, before the first is loaded.
func TestManagerRestartKeepsFirstReconciler(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	p := startReconcileProcess(t, db, "")
	mod := []byte("module one")
	if _, err := NewModules(db).Put(ctx, digestOf(mod), mod); err != nil {
		t.Fatal(err)
	}
	if _, err := p.svc.Create(ctx, Resource, reconcilePlugin("old", digestOf(mod)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	if _, err := p.svc.Create(ctx, Resource, reconcilePlugin("new", digestOf(mod)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConflict(t, p.svc, "new", "old")
	createNote(t, p.svc, "n1")
	p.stop()
	for i := range 3 {
		p = startReconcileProcess(t, db, "old")
		testsupport.Poll(t, 10*time.Second, "old reconciles after a restart", func() (bool, string) {
			return p.host.callsOf("old") > 0, "no call"
		})
		time.Sleep(200 * time.Millisecond)
		if n := p.host.callsOf("new"); n != 0 {
			t.Fatalf("restart %d: new reconciled %d times beside old", i+1, n)
		}
		if names := p.ctls.Names(); !slices.Equal(names, []string{"old"}) {
			t.Fatalf("restart %d: controllers %v, want [old]", i+1, names)
		}
		p.stop()
	}
}

// A Plugin whose controller had a finalizer leaves it on its objects when
// it goes, as an uninstalled Kubernetes operator does: stripping it would
// skip the plugin's cleanup. The Plugin gets a FinalizerLeft event that
// says how to release them, and an object deleted afterwards waits until
// its finalizer is removed by hand.
func TestManagerRemovedPluginLeavesFinalizer(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	p := startReconcileHost(t, db, &reconcileHost{fakeHost: &fakeHost{current: map[string]string{}}, finalize: true, calls: map[string]int{}})
	defer p.stop()
	mod := []byte("module one")
	if _, err := NewModules(db).Put(ctx, digestOf(mod), mod); err != nil {
		t.Fatal(err)
	}
	if _, err := p.svc.Create(ctx, Resource, reconcilePlugin("fin", digestOf(mod)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createNote(t, p.svc, "n1")
	finalizers := func() []string {
		n, err := p.svc.Get(ctx, notes, "default", "n1", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return n.GetFinalizers()
	}
	testsupport.Poll(t, 10*time.Second, "the plugin's finalizer on n1", func() (bool, string) {
		f := finalizers()
		return slices.Equal(f, []string{"setpoint.dev/fin"}), fmt.Sprint(f)
	})
	if err := p.svc.Delete(ctx, Resource, "", "fin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 10*time.Second, "the Plugin gone, with a FinalizerLeft event", func() (bool, string) {
		_, err := p.svc.Get(ctx, Resource, "", "fin", metav1.GetOptions{})
		evs, lerr := p.svc.List(ctx, controller.EventsResource, "default", metav1.ListOptions{})
		if lerr != nil {
			return false, lerr.Error()
		}
		for _, ev := range evs.Items {
			name, _, _ := unstructured.NestedString(ev.Object, "involvedObject", "name")
			msg, _, _ := unstructured.NestedString(ev.Object, "message")
			if name == "fin" && ev.Object["reason"] == "FinalizerLeft" && apierrors.IsNotFound(err) {
				if !strings.Contains(msg, "setpoint.dev/fin") || !strings.Contains(msg, "notes.example.setpoint.dev") || !strings.Contains(msg, "kubectl patch") {
					return false, "message: " + msg
				}
				return true, ""
			}
		}
		return false, fmt.Sprintf("get Plugin: %v; %d events", err, len(evs.Items))
	})
	if f := finalizers(); !slices.Equal(f, []string{"setpoint.dev/fin"}) {
		t.Fatalf("n1's finalizers after the Plugin went: %v, want the plugin's kept", f)
	}
	// Deleting n1 now waits for the finalizer; removing it by hand
	// releases n1.
	if err := p.svc.Delete(ctx, notes, "default", "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	n, err := p.svc.Get(ctx, notes, "default", "n1", metav1.GetOptions{})
	if err != nil || n.GetDeletionTimestamp() == nil {
		t.Fatalf("n1 after its delete: %v, err %v; want it waiting for its finalizer", n, err)
	}
	n.SetFinalizers(nil)
	if _, err := p.svc.Update(ctx, notes, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 10*time.Second, "n1 gone once its finalizer is removed", func() (bool, string) {
		_, err := p.svc.Get(ctx, notes, "default", "n1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
