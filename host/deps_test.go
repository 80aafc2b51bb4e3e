package host_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyDirection keeps host and its subpackages off the engine,
// the store and cmd (DESIGN.md: the host reaches objects only through the
// interfaces it declares). test/layout_test.go checks the whole tree; this
// check fails where the mistake is made.
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/setpoint-dev/setpoint/"
	out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, banned := range []string{"engine", "store", "cmd"} {
			if p == mod+banned || strings.HasPrefix(p, mod+banned+"/") {
				t.Errorf("host depends on %s", p)
			}
		}
	}
}
