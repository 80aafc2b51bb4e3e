package widget_test

import (
	"testing"

	"github.com/setpoint-dev/setpoint/examples/exampletest"
)

// TestWalkthrough runs README.md's walkthrough, once with setpoint and once
// with kubectl, each against a fresh server, and checks what it printed.
func TestWalkthrough(t *testing.T) {
	exampletest.Walkthrough(t, "README.md", []exampletest.Want{
		{Section: "With setpoint", Output: []string{
			"widget", // plugin list
			"Demo widget",
			"Ready",
			"Deprovisioned",
			"widget demo released 16 capacity units",
		}},
		{Section: "With kubectl", Output: []string{
			`"digest":"sha256:`,
			"plugin.setpoint.dev/widget condition met",
			"widget.example.setpoint.dev/demo condition met",
			"capacity: 1",
			"widgetprovision.example.setpoint.dev/demo condition met",
			"widget demo released 16 capacity units",
		}},
	})
}
