package plugins

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// process is one run of the server's plugin side over a store: the engine,
// the host and the manager, stopped by stop as a process exit would.
type process struct {
	svc  *engine.Service
	host *fakeHost
	m    *Manager
	stop func()
}

func startProcess(t *testing.T, db store.Store) *process {
	t.Helper()
	return startProcessHost(t, db, &fakeHost{current: map[string]string{}})
}

// startProcessHost is startProcess with the host h.
func startProcessHost(t *testing.T, db store.Store, h *fakeHost) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Service: svc, Modules: NewModules(db), Host: h, Logger: quietLogger(),
		Controllers: controller.NewManager(controller.ManagerOptions{Logger: quietLogger()}), StatusInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitServed(t, svc)
	return &process{svc: svc, host: h, m: m, stop: func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}}
}

// A Plugin whose new module was refused, or is missing, keeps serving the
// module that served before, across restarts of the server; once the new
// module loads it takes over.
func TestManagerRestoresServingModuleAfterRestart(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	modules := NewModules(db)
	good, bad, later := []byte("good module"), []byte("bad"), []byte("later module")
	goodDigest, badDigest, laterDigest := digestOf(good), digestOf(bad), digestOf(later)
	for _, m := range [][]byte{good, bad} {
		if _, err := modules.Put(ctx, digestOf(m), m); err != nil {
			t.Fatal(err)
		}
	}
	setDigest := func(p *process, digest string) {
		t.Helper()
		cur, err := p.svc.Get(ctx, Resource, "", "policy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(cur.Object, digest, "spec", "module", "digest")
		if _, err := p.svc.Update(ctx, Resource, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// servedBy waits until the plugin answers from digest: after a restart
	// the stored status is the one from before until the manager
	// reconciles.
	servedBy := func(p *process, digest string) {
		t.Helper()
		testsupport.Poll(t, 10*time.Second, "the plugin to answer from "+digest, func() (bool, string) {
			err := p.m.Admitter().Validate(ctx, widgetRequest(engine.OpCreate))
			p.host.mu.Lock()
			running := p.host.current["policy"]
			p.host.mu.Unlock()
			return contains(err, "served by "+digest) && running == digest, fmt.Sprintf("admission: %v, host runs %q", err, running)
		})
	}

	p := startProcess(t, db)
	plugin := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": "policy"},
		"spec": map[string]any{
			"module":    map[string]any{"digest": goodDigest},
			"admission": []any{map[string]any{"resources": []any{"widgets.example.setpoint.dev"}, "type": "Validating"}},
		},
	}}
	if _, err := p.svc.Create(ctx, Resource, plugin, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, p.svc, "loaded", func(st map[string]any) bool { return st["loadedDigest"] == goodDigest })
	setDigest(p, badDigest)
	refused := func(st map[string]any) bool {
		return st["phase"] == PhaseFailed && conditionReason(st, ConditionLoaded) == ReasonInvalidModule && st["loadedDigest"] == goodDigest
	}
	waitStatus(t, p.svc, "refused", refused)
	servedBy(p, goodDigest)
	p.stop()

	// After a restart the refused module is refused again, and the one
	// that served before serves again.
	p = startProcess(t, db)
	servedBy(p, goodDigest)
	waitStatus(t, p.svc, "refused after a restart", refused)

	// The same for a module that was never uploaded.
	setDigest(p, laterDigest)
	missing := func(st map[string]any) bool {
		return st["phase"] == PhasePending && conditionReason(st, ConditionLoaded) == ReasonModuleNotFound && st["loadedDigest"] == goodDigest
	}
	waitStatus(t, p.svc, "missing", missing)
	servedBy(p, goodDigest)
	p.stop()
	p = startProcess(t, db)
	servedBy(p, goodDigest)
	waitStatus(t, p.svc, "missing after a restart", missing)

	// Once the module named by the spec is there, it takes over.
	if _, err := modules.Put(ctx, laterDigest, later); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, p.svc, "the spec's module loaded", func(st map[string]any) bool {
		return st["phase"] == PhaseLoaded && st["loadedDigest"] == laterDigest
	})
	servedBy(p, laterDigest)
	p.stop()
}

// TestManagerStarted: Started closes once each Plugin stored at start was
// reconciled once, whether its module loaded or is missing, and not while
// a load is under way.
func TestManagerStarted(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	module := []byte("exports:admit,reconcile;started")
	digest := digestOf(module)
	if _, err := NewModules(db).Put(ctx, digest, module); err != nil {
		t.Fatal(err)
	}
	started := func(p *process) {
		t.Helper()
		select {
		case <-p.m.Started():
		case <-time.After(10 * time.Second):
			t.Fatal("Started not closed within 10s")
		}
	}
	p := startProcess(t, db)
	started(p) // no stored Plugins
	for name, d := range map[string]string{"loads": digest, "missing": digestOf([]byte("never uploaded"))} {
		plugin := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": Group + "/" + Version, "kind": Kind, "metadata": map[string]any{"name": name},
			"spec": map[string]any{"module": map[string]any{"digest": d},
				"admission": []any{map[string]any{"resources": []any{"widgets.example.setpoint.dev"}, "type": "Validating"}}},
		}}
		if _, err := p.svc.Create(ctx, Resource, plugin, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Eventually(t, 10*time.Second, "the plugin loaded", func() bool {
		p.host.mu.Lock()
		defer p.host.mu.Unlock()
		return p.host.current["loads"] == digest
	})
	p.stop()

	h := &fakeHost{current: map[string]string{}, hold: make(chan struct{}), staging: make(chan string, 4)}
	p = startProcessHost(t, db, h)
	select {
	case name := <-h.staging:
		if name != "loads" {
			t.Fatalf("staged %q, want loads", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stored Plugin's load did not start within 10s")
	}
	select {
	case <-p.m.Started():
		t.Fatal("Started closed while a stored Plugin loads")
	default:
	}
	close(h.hold)
	started(p)
	h.mu.Lock()
	loaded := h.current["loads"]
	h.mu.Unlock()
	if loaded != digest {
		t.Errorf("at Started the host runs %q for the stored Plugin, want %s", loaded, digest)
	}
	p.stop()
}
