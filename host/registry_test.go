package host_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// TestHotSwap swaps versions ten times under continuous concurrent calls:
// no call may fail, and every replaced version must close.
func TestHotSwap(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{})
	reg := host.NewRegistry(h)
	defer reg.Close()
	ctx := context.Background()
	// Two different modules that both admit the request: widget and the
	// requiredlabels policy (no labels configured). Both are Go guests on
	// the native ABI; the Extism path is swapped in TestSwapAcrossABIs.
	modules := [][]byte{hosttest.Module(t, "widget"), hosttest.Module(t, "requiredlabels")}
	// A generous call timeout: the test is about swaps, and a loaded machine
	// under -race can stall single calls for seconds.
	cfg := host.Config{Limits: host.Limits{PoolSize: 2, CallTimeout: 30 * time.Second}}
	if _, err := reg.Install(ctx, "widget", modules[0], cfg); err != nil {
		t.Fatal(err)
	}
	handle := reg.Handle("widget")
	// The ten next versions load before the load starts, so the test time
	// goes to calls and swaps rather than to compiling under -race.
	var versions []*host.Plugin
	for i := range 10 {
		p, err := h.Load(ctx, "widget", modules[(i+1)%2], cfg)
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, p)
	}

	var (
		calls, failures atomic.Int64
		stop            = make(chan struct{})
		wg              sync.WaitGroup
		firstErr        atomic.Value
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := handle.Admit(ctx, &abi.AdmissionRequest{Operation: abi.Create, Object: abi.RawJSON(widgetObj)})
				calls.Add(1)
				if err != nil || !resp.Allowed {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	var old []*host.Plugin
	for _, next := range versions {
		time.Sleep(20 * time.Millisecond)
		prev := reg.Get("widget")
		if err := reg.Swap("widget", next); err != nil {
			t.Fatal(err)
		}
		old = append(old, prev)
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d of %d calls failed; first: %v", n, calls.Load(), firstErr.Load())
	}
	if calls.Load() < 20 {
		t.Fatalf("only %d calls ran", calls.Load())
	}
	t.Logf("%d calls across 10 swaps, none failed", calls.Load())
	// Replaced versions are closed: calling one directly says so.
	for _, p := range old {
		if _, err := p.Admit(ctx, &abi.AdmissionRequest{Operation: abi.Create, Object: abi.RawJSON(widgetObj)}); err == nil {
			t.Fatalf("retired version %s still serves", p.Digest())
		}
	}
	// A refused module replaces nothing.
	cur := reg.Get("widget")
	if _, err := reg.Install(ctx, "widget", []byte("junk"), cfg); !errors.Is(err, host.ErrInvalidModule) {
		t.Fatalf("err = %v", err)
	}
	if reg.Get("widget") != cur {
		t.Fatal("a refused module replaced the running version")
	}
	if _, err := reg.Handle("nope").Reconcile(ctx, &abi.ReconcileRequest{}); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

// TestSwapAcrossABIs swaps a native-ABI version for an Extism-ABI one and
// back under one handle.
func TestSwapAcrossABIs(t *testing.T) {
	reg := host.NewRegistry(hosttest.NewHost(t, host.Options{}))
	defer reg.Close()
	ctx := context.Background()
	handle := reg.Handle("widget")
	for _, m := range []string{"widget", "extismwidget", "widget"} {
		if _, err := reg.Install(ctx, "widget", hosttest.Module(t, m), host.Config{}); err != nil {
			t.Fatal(err)
		}
		resp, err := handle.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj)})
		if err != nil || resp.Status.String("state") != "Provisioning" {
			t.Fatalf("%s: %v %+v", m, err, resp)
		}
	}
}

func TestPoolTrimsIdleInstances(t *testing.T) {
	p := hosttest.Load(t, "widget", host.Config{Limits: host.Limits{PoolSize: 3, IdleTimeout: 50 * time.Millisecond}})
	ctx := context.Background()
	var wg sync.WaitGroup
	var gate sync.WaitGroup
	gate.Add(1)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gate.Wait()
			for range 5 {
				if _, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	gate.Done()
	wg.Wait()
	if n := p.Stats().IdleInstances; n < 1 || n > 3 {
		t.Fatalf("idle = %d, want 1..3", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().IdleInstances > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("idle instances not trimmed: %d", p.Stats().IdleInstances)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCompilationCacheOnDisk checks that a second Host (a restart) on the
// same cache directory compiles nothing: the cache holds the compiled code.
// It uses a tiny module so that the cold compile is cheap under -race; the
// benchmark measures cold and cached loads of real guests.
func TestCompilationCacheOnDisk(t *testing.T) {
	dir := t.TempDir()
	doc := `{"status":{}}`
	wasm := tinyModule(1, packResult(2048, uint32(len(doc))), doc)
	files := func() int {
		n := 0
		filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return nil
		})
		return n
	}
	load := func() {
		h := hosttest.NewHost(t, host.Options{CacheDir: dir})
		p, err := h.Load(context.Background(), "tiny", wasm, host.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Reconcile(context.Background(), &abi.ReconcileRequest{}); err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
	load()
	first := files()
	if first == 0 {
		t.Fatal("nothing written to the cache directory")
	}
	load()
	if n := files(); n != first {
		t.Fatalf("the second load compiled again: %d cache files, then %d", first, n)
	}
}

func TestCloseIdempotent(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{})
	p := hosttest.LoadWith(t, h, "widget", host.Config{})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Reconcile(context.Background(), &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj)}); err == nil {
		t.Fatal("closed plugin served a call")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Load(context.Background(), "widget", hosttest.Module(t, "widget"), host.Config{}); !errors.Is(err, host.ErrClosed) {
		t.Fatalf("load after close: %v", err)
	}
}

func TestTinyModuleABIEdges(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{CacheDir: t.TempDir()})
	ctx := context.Background()
	doc := `{"status":{"ok":true}}`
	tests := []struct {
		name    string
		wasm    []byte
		loadErr error
		callErr error
	}{
		{"works", tinyModule(1, packResult(2048, uint32(len(doc))), doc), nil, nil},
		{"unsupported version", tinyModule(99, 0, doc), host.ErrUnsupportedABI, nil},
		{"output outside memory", tinyModule(1, packResult(65530, 100), doc), nil, host.ErrBadOutput},
		{"guest failure flag", tinyModule(1, packResult(2048, uint32(len(doc)))|0x80000000, doc), nil, host.ErrGuestPanic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := h.Load(ctx, "tiny", tt.wasm, host.Config{})
			if !errors.Is(err, tt.loadErr) {
				t.Fatalf("load err = %v, want %v", err, tt.loadErr)
			}
			if err != nil {
				t.Log(err)
				return
			}
			defer p.Close()
			// The tiny module imports no sched_yield: wazero preempts it.
			if got := p.Preemption(); got != "wazero" {
				t.Fatalf("preemption = %q", got)
			}
			resp, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj)})
			if !errors.Is(err, tt.callErr) {
				t.Fatalf("call err = %v, want %v", err, tt.callErr)
			}
			if err == nil && !resp.Status.Bool("ok") {
				t.Fatalf("status = %s", resp.Status)
			}
		})
	}
}
