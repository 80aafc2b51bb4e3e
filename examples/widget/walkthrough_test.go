package widget_test

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/examples/exampletest"
)

// TestWalkthrough runs README.md's walkthrough, once with setpoint and once
// with kubectl, each against a fresh server, and checks what it printed.
func TestWalkthrough(t *testing.T) {
	sections := exampletest.Sections(t, "README.md")
	tests := []struct {
		section string
		want    []string
	}{
		{"With setpoint", []string{
			"widget", // plugin list
			"Demo widget",
			"Ready",
			"Deprovisioned",
			"widget demo released 16 capacity units",
		}},
		{"With kubectl", []string{
			`"digest":"sha256:`,
			"plugin.setpoint.dev/widget condition met",
			"widget.example.setpoint.dev/demo condition met",
			"capacity: 1",
			"widgetprovision.example.setpoint.dev/demo condition met",
			"widget demo released 16 capacity units",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.section, func(t *testing.T) {
			out := exampletest.Run(t, sections[tt.section])
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
