package replicagroup_test

import (
	"testing"

	"github.com/setpoint-dev/setpoint/examples/exampletest"
)

// TestWalkthrough runs README.md's walkthrough with kubectl and with
// setpoint, each against a fresh server, and checks what it printed.
func TestWalkthrough(t *testing.T) {
	exampletest.Walkthrough(t, "README.md", []exampletest.Want{
		{Section: "With kubectl", Output: []string{
			"replicagroup.example.setpoint.dev/web scaled",
			"web-4",
			"too many replicas: spec.replicas is 80, the plugin's maxReplicas is 50",
			`replicagroup.example.setpoint.dev "web" deleted`,
		}},
		{Section: "With setpoint", Output: []string{"web-2", "Ready"}},
	})
}
