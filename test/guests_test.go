package test

import (
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// The suite's servers share one plugin compile cache, so that each module is
// compiled once per run rather than once per server (TestModulesGC keeps its
// own: it looks into it).
func init() { testserver.SharePluginCache = true }

var (
	buildGuestsOnce sync.Once
	buildGuestsOut  []byte
	buildGuestsErr  error
)

// buildGuests brings every guest module under bin/wasm up to date with its
// sources (.ci/build-wasm, what `make plugins` runs), once per test binary.
func buildGuests(t *testing.T) {
	t.Helper()
	buildGuestsOnce.Do(func() {
		buildGuestsOut, buildGuestsErr = exec.Command(filepath.Join("..", ".ci", "build-wasm")).CombinedOutput()
	})
	if buildGuestsErr != nil {
		t.Fatalf("build the guest modules (make deps installs their toolchains): %v\n%s", buildGuestsErr, buildGuestsOut)
	}
}
