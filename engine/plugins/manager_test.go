package plugins

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// fakeHost stands in for the Wasm host: a module is its bytes, "bad" ones
// are refused, and every plugin's admit denies with the digest it runs. A
// module whose bytes start with "exports:admit,reconcile,finalize;" exports
// the handlers listed (others export admit only); "inittrap..." traps in its
// init, "abi99..." speaks ABI version 99, and "big" needs 2048 pages.
type fakeHost struct {
	mu      sync.Mutex
	current map[string]string // plugin name → digest
	removed []string
	// hold, when set, holds each Stage until it is closed, after Stage has
	// sent the plugin's name on staging.
	hold    chan struct{}
	staging chan string
}

func (h *fakeHost) Check(_ context.Context, wasm []byte, digest string, cfg Config) error {
	// The digest comes with the bytes from the upload or the store; one
	// that does not match them would key the host's caches wrongly.
	if got := digestOf(wasm); digest != got {
		return fmt.Errorf("fakeHost: given digest %s for a module whose digest is %s", digest, got)
	}
	switch s := string(wasm); {
	case s == "bad":
		return errors.New("host: invalid module: bad bytes")
	case strings.HasPrefix(s, "inittrap"):
		return errors.New("host: trap: starting an instance: wasm error: unreachable")
	case strings.HasPrefix(s, "abi99"):
		return errors.New("host: unsupported ABI version: module speaks ABI version 99; this host supports [1]")
	}
	// "big" needs 2048 pages of initial memory, over the default cap.
	if strings.HasPrefix(string(wasm), "big") && cfg.MemoryPages < 2048 {
		return fmt.Errorf("host: memory over the limit: initial memory of 2048 pages exceeds the limit of %d pages", cmp.Or(cfg.MemoryPages, 1024))
	}
	return nil
}

// fakeExports are the exports a fake module declares.
func fakeExports(wasm []byte) Exports {
	list, ok := strings.CutPrefix(string(wasm), "exports:")
	if !ok {
		return Exports{Admit: true}
	}
	list, _, _ = strings.Cut(list, ";")
	var ex Exports
	for _, e := range strings.Split(list, ",") {
		switch e {
		case "admit":
			ex.Admit = true
		case "reconcile":
			ex.Reconcile = true
		case "finalize":
			ex.Finalize = true
		}
	}
	return ex
}

func (h *fakeHost) Stage(ctx context.Context, name string, wasm []byte, digest string, cfg Config) (Candidate, error) {
	if h.hold != nil {
		h.staging <- name
		select {
		case <-h.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := h.Check(ctx, wasm, digest, cfg); err != nil {
		return nil, err
	}
	return &fakeCandidate{h: h, name: name, digest: digest, exports: fakeExports(wasm)}, nil
}

// fakeCandidate is a staged fake module; it serves once committed.
type fakeCandidate struct {
	h         *fakeHost
	name      string
	digest    string
	exports   Exports
	discarded bool
}

func (c *fakeCandidate) Exports() Exports { return c.exports }

func (c *fakeCandidate) Commit() error {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	c.h.current[c.name] = c.digest
	return nil
}

func (c *fakeCandidate) Discard() { c.discarded = true }

func (h *fakeHost) Remove(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.current, name)
	h.removed = append(h.removed, name)
}

func (h *fakeHost) Caller(name string) Caller {
	return admitFunc(func(*abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return &abi.AdmissionResponse{Code: 422, Message: "served by " + h.current[name]}, nil
	})
}

func TestManagerFollowsPlugins(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	db := openTestDB(t)
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{current: map[string]string{}}
	modules := NewModules(db)
	reg := prometheus.NewRegistry()
	m, err := New(Options{Service: svc, Modules: modules, Host: h, Logger: quietLogger(), Registerer: reg,
		Controllers: controller.NewManager(controller.ManagerOptions{Logger: quietLogger()}), StatusInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	good, bad := []byte("good module"), []byte("bad")
	goodDigest, badDigest := digestOf(good), digestOf(bad)
	if _, err := modules.Put(ctx, badDigest, bad); err != nil {
		t.Fatal(err)
	}
	plugin := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": "policy"},
		"spec": map[string]any{
			"module":    map[string]any{"digest": goodDigest},
			"admission": []any{map[string]any{"resources": []any{"widgets.example.setpoint.dev"}, "type": "Validating"}},
		},
	}}
	waitServed(t, svc)
	if _, err := svc.Create(ctx, Resource, plugin, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, svc, "module not uploaded yet", func(st map[string]any) bool {
		return st["phase"] == PhasePending && conditionReason(st, ConditionLoaded) == ReasonModuleNotFound
	})
	if _, err := modules.Put(ctx, goodDigest, good); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, svc, "loaded", func(st map[string]any) bool {
		return st["phase"] == PhaseLoaded && st["loadedDigest"] == goodDigest
	})
	if err := m.Admitter().Validate(ctx, widgetRequest(engine.OpCreate)); err == nil || !contains(err, "served by "+goodDigest) {
		t.Fatalf("admission with the loaded plugin: %v", err)
	}
	waitStatus(t, svc, "the call counted", func(st map[string]any) bool { return fmt.Sprint(st["calls"]) == "1" })
	if got := testutil.ToFloat64(m.met.calls.WithLabelValues("policy")); got != 1 {
		t.Errorf("setpoint_plugin_calls_total = %v, want 1", got)
	}

	// A module the host refuses replaces nothing.
	cur, err := svc.Get(ctx, Resource, "", "policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cur.Object, badDigest, "spec", "module", "digest")
	if _, err := svc.Update(ctx, Resource, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, svc, "refused", func(st map[string]any) bool {
		return st["phase"] == PhaseFailed && conditionReason(st, ConditionLoaded) == ReasonInvalidModule && st["loadedDigest"] == goodDigest
	})
	if err := m.Admitter().Validate(ctx, widgetRequest(engine.OpCreate)); err == nil || !contains(err, "served by "+goodDigest) {
		t.Fatalf("admission after a refused module: %v", err)
	}

	// Deleting the Plugin unloads it.
	if err := svc.Delete(ctx, Resource, "", "policy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "the Plugin finalized", func() bool {
		_, err := svc.Get(ctx, Resource, "", "policy", metav1.GetOptions{})
		return err != nil
	})
	if err := m.Admitter().Validate(ctx, widgetRequest(engine.OpCreate)); err != nil {
		t.Errorf("a removed plugin still admits: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.removed) != 1 || h.removed[0] != "policy" {
		t.Errorf("host removals: %v", h.removed)
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// openTestDB opens a Badger store in a temp dir, closed when the test ends.
func openTestDB(t *testing.T) *badger.DB {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func waitServed(t *testing.T, svc *engine.Service) {
	t.Helper()
	testsupport.Eventually(t, 10*time.Second, "the Plugin kind served", func() bool {
		_, ok := svc.Resource(Resource)
		return ok
	})
}

func waitStatus(t *testing.T, svc *engine.Service, what string, ok func(map[string]any) bool) {
	t.Helper()
	testsupport.Poll(t, 10*time.Second, what, func() (bool, string) {
		obj, err := svc.Get(context.Background(), Resource, "", "policy", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, _, _ := unstructured.NestedMap(obj.Object, "status")
		return ok(st), fmt.Sprintf("status %v", st)
	})
}

func conditionReason(st map[string]any, typ string) string {
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			r, _ := m["reason"].(string)
			return r
		}
	}
	return ""
}
