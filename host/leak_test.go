package host_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
)

// TestClosedVersionsReleaseTheirCode loads and closes many distinct modules
// (every upload check and hot swap is one) on a host with a compilation
// cache, whose wazero engine outlives runtimes: a closed version must give
// its compiled module back, or the heap grows with every load. Tiny modules
// keep it cheap: a leak keeps about 3 KB of heap for each of them (and its
// compiled code, outside the heap); a 3 MB guest keeps about 10 MB. Each
// round also has the host refuse two modules, after the compile and after
// the first instance, which must give their code back too.
func TestClosedVersionsReleaseTheirCode(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{CacheDir: t.TempDir()})
	ctx := context.Background()
	load := func(i int) {
		doc := fmt.Sprintf(`{"status":{"n":%d}}`, i) // a distinct module each time
		p, err := h.Load(ctx, "tiny", tinyModule(1, packResult(2048, uint32(len(doc))), doc), host.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		// Refused modules, as upload checks refuse them: one after its
		// first instance (an ABI version the host does not speak), one
		// right after the compile (an import the host does not offer).
		if _, err := h.Load(ctx, "tiny", tinyModule(99, 0, doc), host.Config{}); !errors.Is(err, host.ErrUnsupportedABI) {
			t.Fatalf("a module of ABI version 99: %v, want ErrUnsupportedABI", err)
		}
		if _, err := h.Load(ctx, "tiny", nativeModule([]string{"no_such_call"}, 1, 0, doc), host.Config{}); !errors.Is(err, host.ErrUnknownImport) {
			t.Fatalf("a module importing no_such_call: %v, want ErrUnknownImport", err)
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for i := range 20 { // warm up what every load shares
		load(i)
	}
	before := heap()
	const n = 500
	for i := range n {
		load(1000 + i)
	}
	grown := int64(heap()) - int64(before)
	t.Logf("heap after %d loads and closes: %+d bytes (%+d per load)", n, grown, grown/n)
	if grown > n*1<<10 {
		t.Errorf("the heap grew by %d bytes over %d loads and closes (%d per load): closed versions keep their code", grown, n, grown/n)
	}
}
