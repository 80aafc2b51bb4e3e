package replicagroup_test

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/examples/exampletest"
)

// TestWalkthrough runs README.md's walkthrough with kubectl and with
// setpoint, each against a fresh server, and checks what it printed.
func TestWalkthrough(t *testing.T) {
	sections := exampletest.Sections(t, "README.md")
	tests := []struct {
		section string
		want    []string
	}{
		{"With kubectl", []string{
			"replicagroup.example.setpoint.dev/web scaled",
			"web-4",
			"too many replicas: spec.replicas is 80, the plugin's maxReplicas is 50",
			`replicagroup.example.setpoint.dev "web" deleted`,
		}},
		{"With setpoint", []string{"web-2", "Ready"}},
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
