package testserver

import (
	"os"
	"path/filepath"
	"testing"
)

// TestModuleRootOfThisCheckout is the lookup go test's working directory
// gives: the checkout's root, which holds go.mod and cmd/setpoint.
func TestModuleRootOfThisCheckout(t *testing.T) {
	t.Setenv(RootEnv, "")
	root := ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "cmd", "setpoint")); err != nil {
		t.Fatalf("ModuleRoot = %q: %v", root, err)
	}
}
