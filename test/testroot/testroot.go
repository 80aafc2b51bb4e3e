// Package testroot finds the repository root that tests, test harnesses
// and benchmarks read examples/, bin/ and .ci/ from: $SETPOINT_ROOT when
// set, otherwise the directory of the main module's go.mod at or above the
// working directory. test/testserver and host/hosttest both find it here,
// so that they agree on it.
//
// It imports only the standard library (test/layout_test.go checks), so
// that a harness that uses it links nothing more, and needs no go tool, so
// that prebuilt test binaries run where there is none.
package testroot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Env names the directory Find returns instead of looking for go.mod: a
// benchmark bundle unpacked where there is no checkout sets it.
const Env = "SETPOINT_ROOT"

// modulePath is the main module's path, as its go.mod declares it.
const modulePath = "github.com/setpoint-dev/setpoint"

// Find returns $SETPOINT_ROOT when it is set, otherwise the nearest
// directory at or above the working directory whose go.mod declares the
// main module (go test runs a package's tests in its directory); a go.mod
// of another module, sdk/'s, is passed over.
func Find() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testroot: %w", err)
	}
	return FindFrom(os.Getenv(Env), wd)
}

// FindFrom is Find with its inputs given: env is $SETPOINT_ROOT and dir
// the directory the search starts from.
func FindFrom(env, dir string) (string, error) {
	if env != "" {
		root, err := filepath.Abs(env)
		if err != nil {
			return "", fmt.Errorf("testroot: %s=%q: %w", Env, env, err)
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("testroot: %s=%q is not a directory", Env, env)
		}
		return root, nil
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if declaresModule(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("testroot: no go.mod of %s at or above %s: run inside the repository or set %s to its root (or to an unpacked benchmark bundle)", modulePath, dir, Env)
		}
	}
}

// declaresModule reports whether the file at path is a go.mod whose module
// directive names the main module.
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
