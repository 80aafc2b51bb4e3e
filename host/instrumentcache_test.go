package host

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestInstrumentedCacheOnDisk: a host on the cache dir of an earlier one
// (a restart) takes the instrumented module from disk; a damaged file is a
// miss, rewritten.
func TestInstrumentedCacheOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wasm := guestModule(guestSpec{reconcile: spinUnless(nestedLoops)})
	want, err := instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	load := func() *Host {
		t.Helper()
		h, err := New(Options{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		p, err := h.Load(ctx, "guest", wasm, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Preemption() != "loop-checks" {
			t.Fatalf("preemption = %q", p.Preemption())
		}
		return h
	}
	h := load()
	path := h.instrumentedPath(Digest(wasm))
	if got, ok := readInstrumented(path); !ok || !bytes.Equal(got, want) {
		t.Fatalf("cached form at %s: ok=%v, equal=%v", path, ok, bytes.Equal(got, want))
	}
	// A damaged file (a nop at the first loop head dropped, its checksum
	// kept) is not used.
	b, _ := os.ReadFile(path)
	i := bytes.Index(b, checker{stop: 0, count: 1, yield: 0}.entry())
	if i < 0 {
		t.Fatal("no loop check in the cached form")
	}
	if err := os.WriteFile(path, append(b[:i:i], b[i+1:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := readInstrumented(path); ok {
		t.Fatal("a damaged file reads as a hit")
	}
	load()
	if got, ok := readInstrumented(path); !ok || !bytes.Equal(got, want) {
		t.Fatal("the damaged file was not rewritten")
	}
	// No temporary files are left behind.
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "tmp-*"))
	if len(files) != 0 {
		t.Fatalf("temporary files left: %v", files)
	}
}

// TestForgetModule: forgetting a module drops its instrumented form from
// memory and disk, leaves other modules' alone, and a later load rebuilds
// it.
func TestForgetModule(t *testing.T) {
	ctx := context.Background()
	h, err := New(Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	gone := guestModule(guestSpec{reconcile: spinUnless(nestedLoops)})
	kept := append(append([]byte{}, gone...), 0, 5, 3, 'g', 'c', '1', 'x') // a custom section: another digest
	for _, wasm := range [][]byte{gone, kept} {
		p, err := h.Load(ctx, "guest", wasm, Config{})
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	cached := func(wasm []byte) (inMemory, onDisk bool) {
		h.mu.Lock()
		_, inMemory = h.instrumented[Digest(wasm)]
		h.mu.Unlock()
		_, onDisk = readInstrumented(h.instrumentedPath(Digest(wasm)))
		return inMemory, onDisk
	}
	if m, d := cached(gone); !m || !d {
		t.Fatalf("before: in memory %v, on disk %v", m, d)
	}
	h.ForgetModule(Digest(gone))
	if m, d := cached(gone); m || d {
		t.Fatalf("forgotten module: in memory %v, on disk %v", m, d)
	}
	if m, d := cached(kept); !m || !d {
		t.Fatalf("other module: in memory %v, on disk %v", m, d)
	}
	h.mu.Lock()
	order := slices.Clone(h.order)
	h.mu.Unlock()
	if slices.Contains(order, Digest(gone)) || len(order) != 1 {
		t.Fatalf("order = %v", order)
	}
	h.ForgetModule(Digest(gone)) // twice is fine
	p, err := h.Load(ctx, "guest", gone, Config{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if m, d := cached(gone); !m || !d {
		t.Fatalf("reloaded: in memory %v, on disk %v", m, d)
	}
}
