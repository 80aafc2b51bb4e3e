package host_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// What a guest prints reaches the plugin's log a line at a time, as the log
// host function's lines do: here the Go runtime's fatal error when the
// guest runs out of memory.
func TestGuestOutputIsLogged(t *testing.T) {
	logs := newRecords()
	h := hosttest.NewHost(t, host.Options{Logger: slog.New(logs)})
	p := hosttest.LoadWith(t, h, "faulty", host.Config{Limits: host.Limits{MemoryPages: 256}})
	resp, err := p.Reconcile(context.Background(), &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: map[string]string{"mode": "alloc"}})
	if err == nil && (resp == nil || resp.Error == "") {
		t.Fatal("a guest out of memory succeeded")
	}
	var lines []string
	for _, m := range *logs.got {
		if m["msg"] == "plugin log" && m["plugin"] == "faulty" {
			if strings.Contains(m["message"], "\n") {
				t.Errorf("a logged line holds a newline: %q", m["message"])
			}
			lines = append(lines, m["message"])
		}
	}
	if !strings.Contains(strings.Join(lines, "\n"), "out of memory") {
		t.Errorf("the runtime's fatal error is not in the plugin's log lines: %q", lines)
	}
}
