package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/store"
)

// forgetfulHost is a fakeHost that records ForgetModule calls.
type forgetfulHost struct {
	*fakeHost
	fmu       sync.Mutex
	forgotten []string
}

func (h *forgetfulHost) ForgetModule(digest string) {
	h.fmu.Lock()
	defer h.fmu.Unlock()
	h.forgotten = append(h.forgotten, digest)
}

func (h *forgetfulHost) forgot() []string {
	h.fmu.Lock()
	defer h.fmu.Unlock()
	return slices.Clone(h.forgotten)
}

// testClock is a settable clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// syncBuffer collects logs written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

type gcEnv struct {
	svc     *engine.Service
	modules *Modules
	host    *forgetfulHost
	clock   *testClock
	logs    *syncBuffer
	m       *Manager
}

// newGCEnv builds a manager over a real Badger store and engine, with the
// Plugin kind registered; the manager does not run unless the test runs it.
func newGCEnv(t *testing.T) *gcEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := openTestDB(t)
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureKind(ctx, svc); err != nil {
		t.Fatal(err)
	}
	waitServed(t, svc)
	e := &gcEnv{svc: svc, modules: NewModules(db), host: &forgetfulHost{fakeHost: &fakeHost{current: map[string]string{}}},
		clock: &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, logs: &syncBuffer{}}
	e.m = e.newManager(t)
	return e
}

func (e *gcEnv) newManager(t *testing.T) *Manager {
	t.Helper()
	m, err := New(Options{Service: e.svc, Modules: e.modules, Host: e.host,
		Controllers: controller.NewManager(controller.ManagerOptions{Logger: quietLogger()}),
		Logger:      slog.New(slog.NewTextHandler(e.logs, nil)),
		// Passes are made by the test; Run's own come an hour apart.
		ModuleGCGrace: 10 * time.Minute, ModuleGCInterval: time.Hour, Now: e.clock.Now,
		StatusInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (e *gcEnv) put(t *testing.T, wasm string) string {
	t.Helper()
	d := digestOf([]byte(wasm))
	if _, err := e.modules.Put(context.Background(), d, []byte(wasm)); err != nil {
		t.Fatal(err)
	}
	return d
}

func (e *gcEnv) createPlugin(t *testing.T, name, digest, loadedDigest string) {
	t.Helper()
	ctx := context.Background()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"module": map[string]any{"digest": digest}},
	}}
	created, err := e.svc.Create(ctx, Resource, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if loadedDigest == "" {
		return
	}
	created.Object["status"] = map[string]any{"phase": PhaseFailed, "loadedDigest": loadedDigest}
	if _, err := e.svc.UpdateStatus(ctx, Resource, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *gcEnv) collect(t *testing.T, m *Manager) {
	t.Helper()
	if err := m.ModuleGC().Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// stored reports which of digests are still stored.
func (e *gcEnv) stored(t *testing.T, digests ...string) []bool {
	t.Helper()
	out := make([]bool, len(digests))
	for i, d := range digests {
		_, err := e.modules.Get(context.Background(), d)
		switch {
		case err == nil:
			out[i] = true
		case !errors.Is(err, ErrModuleNotFound):
			t.Fatal(err)
		}
	}
	return out
}

// TestModuleGC: referenced modules (spec.module.digest, status.loadedDigest)
// stay; an unreferenced one goes after the grace period, with the host's
// cache entry and an info log; one referenced or uploaded again during the
// grace period starts it again; a restart starts every grace period again.
func TestModuleGC(t *testing.T) {
	e := newGCEnv(t)
	bySpec := e.put(t, "module used by a spec")
	byStatus := e.put(t, "module still serving")
	unused := e.put(t, "module nobody uses")
	adopted := e.put(t, "module used during the grace period")
	reuploaded := e.put(t, "module uploaded again")
	refused := digestOf([]byte("never uploaded"))
	e.createPlugin(t, "spec-user", bySpec, "")
	// The Plugin's new module was refused: the old one keeps serving, and
	// must be there after a restart.
	e.createPlugin(t, "status-user", refused, byStatus)

	e.collect(t, e.m) // t=0: every unused module noted
	e.clock.Advance(5 * time.Minute)
	e.createPlugin(t, "adopter", adopted, "")
	if _, err := e.modules.Touch(context.Background(), reuploaded); err != nil {
		t.Fatal(err)
	}
	e.collect(t, e.m) // t=5m
	if got := e.host.forgot(); len(got) != 0 {
		t.Fatalf("deleted before the grace period: %v", got)
	}
	e.clock.Advance(5 * time.Minute)
	e.collect(t, e.m) // t=10m: the grace period of unused is over
	if got, want := e.stored(t, bySpec, byStatus, unused, adopted, reuploaded), []bool{true, true, false, true, true}; !slices.Equal(got, want) {
		t.Fatalf("at 10m stored = %v, want %v (spec, status, unused, adopted, re-uploaded)", got, want)
	}
	if got := e.host.forgot(); !slices.Equal(got, []string{unused}) {
		t.Fatalf("host forgot %v, want %v", got, []string{unused})
	}
	if logs := e.logs.String(); !strings.Contains(logs, `msg="module deleted" digest=`+unused+" size=18") {
		t.Errorf("no deletion log with digest and size:\n%s", logs)
	}

	// The adopter lets go: its module starts a fresh grace period.
	if err := e.svc.Delete(context.Background(), Resource, "", "adopter", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(5 * time.Minute)
	e.collect(t, e.m) // t=15m: re-uploaded's grace period (from 5m) is over; adopted noted
	if got, want := e.stored(t, adopted, reuploaded), []bool{true, false}; !slices.Equal(got, want) {
		t.Fatalf("at 15m stored = %v, want %v (adopted, re-uploaded)", got, want)
	}

	// A restart forgets when modules were found unused: it starts over.
	e.clock.Advance(9 * time.Minute)
	restarted := e.newManager(t)
	e.collect(t, restarted) // t=24m, the restarted GC's first pass
	e.clock.Advance(9 * time.Minute)
	e.collect(t, restarted) // t=33m: 18 minutes unused, but only 9 known to this GC
	if got := e.stored(t, adopted); !got[0] {
		t.Fatal("the first passes after a restart deleted a module")
	}
	e.clock.Advance(time.Minute)
	e.collect(t, restarted)
	if got, want := e.stored(t, bySpec, byStatus, adopted), []bool{true, true, false}; !slices.Equal(got, want) {
		t.Fatalf("at 34m stored = %v, want %v (spec, status, adopted)", got, want)
	}

	// Uploading a deleted module again is a fresh upload.
	if created, err := e.modules.Put(context.Background(), unused, []byte("module nobody uses")); err != nil || !created {
		t.Fatalf("upload again: created %v, %v", created, err)
	}
}

// TestModuleGCRestoresModuleUsedDuringDelete: a Plugin written to name a
// module between the GC's decision and its delete gets the module back.
func TestModuleGCRestoresModuleUsedDuringDelete(t *testing.T) {
	e := newGCEnv(t)
	ctx := context.Background()
	d := e.put(t, "module adopted while deleted")
	g := e.m.ModuleGC()
	kv, err := e.modules.remove(ctx, d, e.modules.mark(d))
	if err != nil {
		t.Fatal(err)
	}
	e.createPlugin(t, "late", d, "")
	g.mu.Lock()
	restored := g.settle(ctx, map[string]*removedModule{d: kv})
	g.mu.Unlock()
	if !slices.Equal(restored[d], []string{"late"}) {
		t.Fatalf("restored = %v", restored)
	}
	if got := e.stored(t, d); !got[0] {
		t.Fatal("the module was not restored")
	}
	if got := e.host.forgot(); len(got) != 0 {
		t.Fatalf("host forgot %v", got)
	}
	// An upload after the decision keeps the module.
	mark := e.modules.mark(d)
	if _, err := e.modules.Touch(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := e.modules.remove(ctx, d, mark); !errors.Is(err, errUploadedAgain) {
		t.Fatalf("remove after an upload: %v", err)
	}
}

// TestModuleGCWithManager: with the manager running, the module it runs
// stays; a Plugin created to name a deleted module waits with reason
// ModuleNotFound, and uploading the module again loads it.
func TestModuleGCWithManager(t *testing.T) {
	e := newGCEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	old := e.put(t, "old module")
	e.createPlugin(t, "policy", old, "")
	waitStatus(t, e.svc, "loaded", func(st map[string]any) bool { return st["loadedDigest"] == old })
	e.collect(t, e.m)
	e.clock.Advance(time.Hour)
	e.collect(t, e.m)
	if got := e.stored(t, old); !got[0] {
		t.Fatal("the loaded module was deleted")
	}
	if _, err := e.m.ModuleGC().Delete(ctx, old); !errors.Is(err, ErrModuleInUse) {
		t.Fatalf("Delete of a used module: %v", err)
	}

	// Switch to a module the GC has just deleted.
	gone := e.put(t, "deleted module")
	if _, err := e.m.ModuleGC().Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	cur, err := e.svc.Get(ctx, Resource, "", "policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cur.Object, gone, "spec", "module", "digest")
	if _, err := e.svc.Update(ctx, Resource, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.svc, "module not found", func(st map[string]any) bool {
		return st["phase"] == PhasePending && conditionReason(st, ConditionLoaded) == ReasonModuleNotFound && st["loadedDigest"] == old
	})
	e.put(t, "deleted module")
	waitStatus(t, e.svc, "loaded after the upload", func(st map[string]any) bool {
		return st["phase"] == PhaseLoaded && st["loadedDigest"] == gone
	})
	// The old module is unused now and goes after the grace period.
	e.collect(t, e.m)
	e.clock.Advance(10 * time.Minute)
	e.collect(t, e.m)
	if got, want := e.stored(t, old, gone), []bool{false, true}; !slices.Equal(got, want) {
		t.Fatalf("stored = %v, want %v (old, current)", got, want)
	}
}

// TestModulesEndpoint: GET lists modules with their users; DELETE deletes
// an unused module, refuses a used one with 409 naming its Plugins, and
// answers 404 for an absent one; a deleted module uploads again as new.
func TestModulesEndpoint(t *testing.T) {
	e := newGCEnv(t)
	h := NewUploadHandler(UploadOptions{Modules: e.modules, Host: e.host, GC: e.m.ModuleGC(), Logger: quietLogger()})
	used := e.put(t, "used module")
	free := e.put(t, "free module")
	e.createPlugin(t, "user-b", used, "")
	e.createPlugin(t, "user-a", digestOf([]byte("refused")), used)
	do := func(method, path string, body []byte) (int, string) {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		if body != nil {
			req.Header.Set("Content-Type", "application/wasm")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}

	code, body := do("GET", ModulesPath, nil)
	var list ModuleList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("GET %s: %d %s", ModulesPath, code, body)
	}
	want := []ModuleUsage{{Digest: used, Size: 11, UsedBy: []string{"user-a", "user-b"}}, {Digest: free, Size: 11, UsedBy: []string{}}}
	slices.SortFunc(want, func(a, b ModuleUsage) int { return strings.Compare(a.Digest, b.Digest) })
	if list.Kind != "ModuleList" || len(list.Items) != 2 ||
		list.Items[0].Digest != want[0].Digest || list.Items[1].Digest != want[1].Digest ||
		list.Items[0].Size != 11 || list.Items[1].Size != 11 ||
		!slices.Equal(list.Items[0].UsedBy, want[0].UsedBy) || !slices.Equal(list.Items[1].UsedBy, want[1].UsedBy) {
		t.Fatalf("list = %+v, want %+v", list, want)
	}
	if !strings.Contains(body, `"usedBy":[]`) {
		t.Errorf("an unused module's usedBy is not an empty list: %s", body)
	}

	tests := []struct {
		name, method, path string
		body               []byte
		code               int
		contains           string
	}{
		{"delete a used module", "DELETE", ModulesPath + "/" + used, nil, 409, "used by Plugins user-a, user-b"},
		{"delete a malformed digest", "DELETE", ModulesPath + "/sha256:xyz", nil, 400, "64 lower-case hex"},
		{"delete the list", "DELETE", ModulesPath, nil, 405, "POST"},
		{"delete an unused module", "DELETE", ModulesPath + "/" + free, nil, 200, `"size":11`},
		{"it is gone", "GET", ModulesPath + "/" + free, nil, 404, "no module"},
		{"delete it again", "DELETE", ModulesPath + "/" + free, nil, 404, "no module " + free},
		{"the used module stays", "GET", ModulesPath + "/" + used, nil, 200, "used module"},
		{"upload the deleted module again", "POST", ModulesPath, []byte("free module"), 201, `"created":true`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(tt.method, tt.path, tt.body)
			if code != tt.code || !strings.Contains(body, tt.contains) {
				t.Fatalf("%s %s: %d %s; want %d with %q", tt.method, tt.path, code, body, tt.code, tt.contains)
			}
			if code >= 400 {
				var st struct{ Kind, Reason string }
				if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" || st.Reason == "" {
					t.Errorf("error body is not a Status with a reason: %s", body)
				}
			}
		})
	}
	if got := e.host.forgot(); !slices.Equal(got, []string{free}) {
		t.Errorf("host forgot %v, want %v", got, []string{free})
	}
}

// TestModuleGCUploadRace runs uploads of a module past its grace period
// against GC passes, under -race: an upload that finds the module stored
// (or stores it) is never undone by the pass. The narrow window between a
// pass's decision and its delete is tested deterministically in
// TestModuleGCRestoresModuleUsedDuringDelete.
func TestModuleGCUploadRace(t *testing.T) {
	e := newGCEnv(t)
	ctx := context.Background()
	g := e.m.ModuleGC()
	for i := range 30 {
		wasm := []byte("module " + strings.Repeat("x", i))
		d := e.put(t, string(wasm))
		e.collect(t, e.m)
		e.clock.Advance(11 * time.Minute) // the next pass deletes it, unless uploaded again
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := g.Collect(ctx); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			stored, err := e.modules.Touch(ctx, d)
			if err == nil && !stored {
				_, err = e.modules.Put(ctx, d, wasm)
			}
			if err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		if got := e.stored(t, d); !got[0] {
			t.Fatalf("round %d: an upload was undone by a concurrent pass", i)
		}
		e.collect(t, e.m) // the upload restarted the grace period
		if got := e.stored(t, d); !got[0] {
			t.Fatalf("round %d: deleted right after an upload", i)
		}
	}
}

// listCounter counts the Lists of module bytes (not keys-only) it serves.
type listCounter struct {
	store.Store
	valueLists atomic.Int64
}

func (c *listCounter) List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error) {
	if strings.HasPrefix(prefix, modulesAt.modules) && !opts.KeysOnly {
		c.valueLists.Add(1)
	}
	return c.Store.List(ctx, prefix, opts)
}

// A collection pass lists the modules by key: it never reads their bytes,
// which are megabytes each.
func TestModuleGCReadsNoModuleBytes(t *testing.T) {
	e := newGCEnv(t)
	ctr := &listCounter{Store: e.modules.st}
	e.modules.st = ctr
	unused := e.put(t, "module nobody uses")
	e.collect(t, e.m)
	e.clock.Advance(11 * time.Minute)
	e.collect(t, e.m)
	if _, err := e.modules.Get(context.Background(), unused); !errors.Is(err, ErrModuleNotFound) {
		t.Fatalf("the unused module was not collected: %v", err)
	}
	if n := ctr.valueLists.Load(); n != 0 {
		t.Errorf("collection read module bytes in %d Lists", n)
	}
}
