package test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestPluginPreemptionShown: a Plugin's status and `setpoint plugin
// describe` say how the host stops the module's calls at their deadline.
func TestPluginPreemptionShown(t *testing.T) {
	labels := wasmModule(t, "requiredlabels")
	s := testserver.Start(t, testserver.Options{})
	ok(t, s, "apply", "-f", filepath.Join(writeFiles(t, map[string]string{"crd.yaml": widgetCRD}), "crd.yaml"))
	ok(t, s, "plugin", "install", "labels", "--wasm", labels, "--admit", "wd", "--config", "labels=team")
	testsupport.Poll(t, time.Minute, "status.preemption loop-checks (a Go guest imports sched_yield)", func() (bool, string) {
		got := strings.TrimSpace(ok(t, s, "get", "plugin", "labels", "-o", "jsonpath={.status.preemption}"))
		return got == "loop-checks", fmt.Sprintf("status.preemption = %q", got)
	})
	if out := ok(t, s, "plugin", "describe", "labels"); !strings.Contains(out, "Preemption:     loop-checks") {
		t.Errorf("plugin describe lacks the preemption mode:\n%s", out)
	}
}
