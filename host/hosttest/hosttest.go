// Package hosttest runs built plugin modules under the real host in Go
// tests, so plugin authors test what they ship:
//
//	func TestUnderHost(t *testing.T) {
//		p := hosttest.Load(t, "requiredlabels", host.Config{})
//		resp, err := p.Admit(ctx, &abi.AdmissionRequest{...})
//	}
//
// Modules are found in the repository's bin/wasm, built on first use by
// .ci/build-wasm (what `make plugins` runs).
//
// This package is bound to this repository (it finds the root through the
// go.mod above the working directory, or $SETPOINT_ROOT, as test/testroot
// does, and imports the server's module, which is not downloadable). A
// plugin project outside it uses the SDK's sdk/realhost instead, which runs
// the built module under this same host through the setpoint binary
// (`setpoint plugin call`, `plugin test`); see docs/PLUGINS.md.
package hosttest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/test/testroot"
)

var (
	buildOnce sync.Once
	buildErr  error
	root      string
)

// Root returns the repository root, as test/testserver finds it:
// $SETPOINT_ROOT, or the nearest directory at or above the working
// directory whose go.mod declares the setpoint module (testroot.Find).
func Root() (string, error) {
	return testroot.Find()
}

// Build builds every guest module once per test process.
func Build() error {
	buildOnce.Do(func() {
		root, buildErr = Root()
		if buildErr != nil {
			return
		}
		cmd := exec.Command(filepath.Join(root, ".ci", "build-wasm"))
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("hosttest: building guest modules: %v\n%s\nRun `make plugins` and fix the build", err, out)
		}
	})
	return buildErr
}

// Path returns the path of the built module name (bin/wasm/<name>.wasm).
func Path(t testing.TB, name string) string {
	t.Helper()
	if err := Build(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "bin", "wasm", name+".wasm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("hosttest: module %s not built (%v); run `make plugins`", name, err)
	}
	return p
}

// Module returns the bytes of the built module name.
func Module(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(Path(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// CacheDir is the compilation cache the tests of every package share,
// bin/wasm-cache in the repository: compiled modules survive between runs
// (the cache is keyed by module digest and wazero version, and written
// atomically, so concurrent test processes may share it).
func CacheDir(t testing.TB) string {
	t.Helper()
	if err := Build(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "bin", "wasm-cache")
}

// NewHost returns a Host, by default on the shared CacheDir and logging
// warnings to the test log, closed at the end of the test.
func NewHost(t testing.TB, opts host.Options) *host.Host {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = CacheDir(t)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	h, err := host.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// Load loads the built module name under a new Host and returns it.
func Load(t testing.TB, name string, cfg host.Config) *host.Plugin {
	t.Helper()
	return LoadWith(t, NewHost(t, host.Options{}), name, cfg)
}

// HangTimeout is the compile and call timeout of LoadUnhurried: long enough
// that only a hang meets it.
const HangTimeout = 30 * time.Second

// LoadUnhurried loads the built module name under a new Host for a test of
// what the plugin answers, not of how fast: the compile may take minutes
// and each call HangTimeout. Under the race detector on a loaded machine a
// Go guest's first compile takes over a minute, and a call more than the
// default second, which the default deadlines would report as failures of
// the plugin.
func LoadUnhurried(t testing.TB, name string, cfg host.Config) *host.Plugin {
	t.Helper()
	cfg.Limits.CallTimeout = HangTimeout
	return LoadWith(t, NewHost(t, host.Options{CompileTimeout: 10 * time.Minute}), name, cfg)
}

// LoadWith loads the built module name under h.
func LoadWith(t testing.TB, h *host.Host, name string, cfg host.Config) *host.Plugin {
	t.Helper()
	p, err := h.Load(context.Background(), name, Module(t, name), cfg)
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
