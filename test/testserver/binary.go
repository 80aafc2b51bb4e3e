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
// examples/ and bin/: $SETPOINT_ROOT, or the main module's directory at or
// above the working directory. It fails t when there is none.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// RootEnv names the directory ModuleRoot returns instead of looking for
// go.mod: a benchmark bundle unpacked where there is no checkout sets it.
const RootEnv = "SETPOINT_ROOT"

// modulePath is the main module's path, as its go.mod declares it.
const modulePath = "github.com/setpoint-dev/setpoint"

// moduleRoot is $SETPOINT_ROOT when set, otherwise the nearest directory at
// or above the working directory whose go.mod declares the main module (go
// test runs a package's tests in its directory). No go tool is needed, so
// prebuilt test binaries run where there is none.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testserver: module root: %w", err)
	}
	return findRoot(os.Getenv(RootEnv), wd)
}

// findRoot is moduleRoot with its inputs given: env is $SETPOINT_ROOT and
// dir the directory the search starts from.
func findRoot(env, dir string) (string, error) {
	if env != "" {
		root, err := filepath.Abs(env)
		if err != nil {
			return "", fmt.Errorf("testserver: %s=%q: %w", RootEnv, env, err)
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("testserver: %s=%q is not a directory", RootEnv, env)
		}
		return root, nil
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if declaresModule(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("testserver: no go.mod of %s at or above %s: run inside the repository or set %s to its root (or to an unpacked benchmark bundle)", modulePath, dir, RootEnv)
		}
	}
}

// declaresModule reports whether the file at path is a go.mod whose module
// directive names the main module (sdk/ holds a module of its own).
func declaresModule(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		if i := strings.Index(rest, "//"); i >= 0 {
			rest = rest[:i]
		}
		return strings.Trim(strings.TrimSpace(rest), `"`+"`") == modulePath
	}
	return false
}

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
