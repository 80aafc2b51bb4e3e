package host_test

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
)

// TestPreemptionMode: the host says how each module's calls are stopped,
// and why a native module runs on the slower path.
func TestPreemptionMode(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{})
	out := `{"status":{"state":"ok"}}`
	tiny, err := h.Load(t.Context(), "tiny", tinyModule(1, packResult(2048, uint32(len(out))), out), host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close()
	if tiny.Preemption() != "wazero" || !strings.Contains(tiny.PreemptionReason(), "does not import wasi_snapshot_preview1.sched_yield") {
		t.Fatalf("a module without sched_yield: preemption %q (%q)", tiny.Preemption(), tiny.PreemptionReason())
	}
	widget := hosttest.LoadWith(t, h, "widget", host.Config{})
	if widget.Preemption() != "loop-checks" || widget.PreemptionReason() != "" {
		t.Fatalf("a Go guest: preemption %q (%q)", widget.Preemption(), widget.PreemptionReason())
	}
}
