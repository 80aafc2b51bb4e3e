package test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestCLIApplyServerSide: setpoint apply --server-side creates, leaves an
// unchanged object alone, changes it, refuses to take a field another
// manager owns unless forced, honours --dry-run=server, and records the
// owners in managedFields.
func TestCLIApplyServerSide(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ok(t, s, "apply", "-f", filepath.Join(writeFiles(t, map[string]string{"crd.yaml": widgetCRD}), "crd.yaml"))
	manifest := func(size string) string {
		return filepath.Join(writeFiles(t, map[string]string{"w.yaml": "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: ssa}\nspec: {name: SSA, size: " + size + "}\n"}), "w.yaml")
	}
	small, medium, large := manifest("small"), manifest("medium"), manifest("large")
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "--server-side", "-f", small}, "widget.example.setpoint.dev/ssa created\n"},
		{[]string{"apply", "--server-side", "-f", small}, "widget.example.setpoint.dev/ssa unchanged\n"},
		{[]string{"apply", "--server-side", "-f", medium}, "widget.example.setpoint.dev/ssa configured\n"},
		{[]string{"apply", "--server-side", "--dry-run=server", "-f", large}, "widget.example.setpoint.dev/ssa configured (server dry run)\n"},
	} {
		if out := ok(t, s, step.args...); out != step.want {
			t.Errorf("setpoint %s: %q, want %q", strings.Join(step.args, " "), out, step.want)
		}
	}
	if size := ok(t, s, "get", "widget", "ssa", "-o", "jsonpath={.spec.size}"); size != "medium" {
		t.Errorf("size after a dry run: %q, want medium", size)
	}
	// Another manager may not take spec.size without forcing it.
	fails(t, s, nil, "", 5, []string{"conflict", "spec.size", "--force-conflicts"}, "apply", "--server-side", "--field-manager", "other", "-f", large)
	if out := ok(t, s, "apply", "--server-side", "--field-manager", "other", "--force-conflicts", "-f", large); out != "widget.example.setpoint.dev/ssa configured\n" {
		t.Errorf("forced apply: %q", out)
	}
	if size := ok(t, s, "get", "widget", "ssa", "-o", "jsonpath={.spec.size}"); size != "large" {
		t.Errorf("size after the forced apply: %q, want large", size)
	}
	managers, stderr, err := s.Kubectl("get", "widget", "ssa", "--show-managed-fields", "-o", "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation} {end}")
	if err != nil {
		t.Fatalf("kubectl get managedFields: %v\n%s", err, stderr)
	}
	if !strings.Contains(managers, "setpoint/Apply") || !strings.Contains(managers, "other/Apply") {
		t.Errorf("managedFields managers: %q, want setpoint/Apply and other/Apply", managers)
	}
	fails(t, s, nil, "", 2, []string{"--force-conflicts needs --server-side"}, "apply", "--force-conflicts", "-f", small)
}
