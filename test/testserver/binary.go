package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// ModuleRoot returns the repository root, where tests and benchmarks find
// examples/ and bin/; it fails t when there is none.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("testserver: not inside the setpoint module")
	}
	return filepath.Dir(gomod), nil
}

// Binary returns the path of a setpoint binary built from the current sources:
// $SETPOINT_BIN when set, otherwise bin/.e2e/setpoint in the module, built with
// `go build` once per test binary. go build leaves an up-to-date binary alone,
// so this costs a link only when the sources changed; a file lock keeps test
// binaries that run in parallel from building over each other.
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
	root, err := moduleRoot()
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
