package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testroot"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// ModuleRoot returns the repository root, where tests and benchmarks find
// examples/ and bin/: $SETPOINT_ROOT, or the main module's directory at or
// above the working directory (testroot.Find). It fails t when there is
// none.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	root, err := testroot.Find()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// RootEnv names the directory ModuleRoot returns instead of looking for
// go.mod: a benchmark bundle unpacked where there is no checkout sets it.
const RootEnv = testroot.Env

// Binary returns the path of a setpoint binary built from the current sources:
// $SETPOINT_BIN when set, otherwise bin/.e2e/setpoint in the module, built with
// `go build` once per test binary (the harness's only use of the go tool).
// go build leaves an up-to-date binary alone, so this costs a link only when
// the sources changed; a file lock keeps test binaries that run in parallel
// from building over each other.
func Binary() (string, error) {
	buildOnce.Do(func() {
		if p := os.Getenv("SETPOINT_BIN"); p != "" {
			buildPath, buildErr = filepath.Abs(p)
			return
		}
		buildPath, buildErr = build()
	})
	return buildPath, buildErr
}

func build() (string, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("testserver: no go tool to build ./cmd/setpoint (%w): set SETPOINT_BIN to a built setpoint", err)
	}
	root, err := testroot.Find()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", ".e2e")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build setpoint: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("build setpoint: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("build setpoint: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	out := filepath.Join(dir, "setpoint")
	// -buildvcs=auto stamps the commit /version reports; a checkout git
	// will not read (another owner) is built without it.
	cmd := exec.Command("go", "build", "-buildvcs=auto", "-o", out, "./cmd/setpoint")
	cmd.Dir = root
	if _, err := cmd.CombinedOutput(); err != nil {
		cmd = exec.Command("go", "build", "-buildvcs=false", "-o", out, "./cmd/setpoint")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build ./cmd/setpoint: %w\n%s", err, b)
		}
	}
	return out, nil
}
