//go:build compilecache

package hosttest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
)

// TestFillCompileCache compiles every module in bin/wasm into the compile
// cache the tests share (hosttest.CacheDir), under the host's default
// configuration, which is what most tests load with. `make plugins` runs it
// without the race detector, where a 3 MB Go guest compiles in a second or
// two rather than the ten or more it takes in a race-enabled test binary;
// the tests then load the module from the cache.
//
// It is a test, behind the compilecache tag, rather than a program because
// wazero names its cache directory after its own version as the running
// binary records it: a test binary records none ("dev"), a program built
// with go build or go run records the module's, and their caches do not
// meet.
func TestFillCompileCache(t *testing.T) {
	root, err := hosttest.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := hosttest.CacheDir(t) // builds the modules first
	mods, err := filepath.Glob(filepath.Join(root, "bin", "wasm", "*.wasm"))
	if err != nil || len(mods) == 0 {
		t.Fatalf("no modules in bin/wasm (%v)", err)
	}
	fill := hosttest.NewHost(t, host.Options{CacheDir: dir, CompileTimeout: 10 * time.Minute})
	type module struct {
		path string
		wasm []byte
	}
	var loaded []module
	for _, path := range mods {
		name := strings.TrimSuffix(filepath.Base(path), ".wasm")
		wasm, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := fill.Load(context.Background(), name, wasm, host.Config{})
		var me *host.ModuleError
		switch {
		case errors.As(err, &me):
			// A guest built to be refused (a bad import, a trap in its
			// start): what compiled of it is cached all the same.
			t.Logf("%s: refused as built: %v", name, err)
			continue
		case err != nil:
			t.Errorf("%s: %v", name, err)
			continue
		}
		p.Close()
		loaded = append(loaded, module{path, wasm})
	}
	if len(loaded) == 0 {
		t.Fatal("no module loaded")
	}
	// A host that would start a module it has not compiled before on the
	// interpreter finds each one compiled: the cache and its marks hold.
	check := hosttest.NewHost(t, host.Options{CacheDir: dir, InterpreterFirst: true, InterpreterMinCodeBytes: 1})
	for _, m := range loaded {
		p, err := check.Load(context.Background(), filepath.Base(m.path), m.wasm, host.Config{})
		if err != nil {
			t.Errorf("%s: loading again: %v", m.path, err)
			continue
		}
		if tier := p.Tier(); tier != host.TierCompiled {
			t.Errorf("%s: loaded again on the %s, want compiled from the cache", m.path, tier)
		}
		p.Close()
	}
	t.Logf("%d of %d modules compiled into %s", len(loaded), len(mods), dir)
}
