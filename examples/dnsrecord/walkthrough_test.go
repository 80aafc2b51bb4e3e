package dnsrecord_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/examples/exampletest"
)

// TestWalkthrough runs README.md's walkthrough against a fresh server: the
// fake DNS service started on loopback, the Secret and the Plugin with its
// egress grant, a record created, changed, drifted and repaired, a 500
// retried, and the record deleted from the service by the finalizer.
func TestWalkthrough(t *testing.T) {
	steps := exampletest.Sections(t, "README.md")["Walkthrough"]
	// The fake service runs in the background: stop it however the script
	// ends (its last step stops it when all goes well). Each traced command
	// shows the seconds since the script started, so a slow step shows.
	steps = append([]string{`trap '[ -z "${FAKEDNS_PID:-}" ] || kill "$FAKEDNS_PID" 2>/dev/null || true' EXIT`, `PS4='+ [${SECONDS}s] '`}, steps...)
	// The walkthrough builds the fake service with go build, under a HOME
	// of its own: keep the Go caches this test's go uses, or the build
	// starts from nothing.
	env, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	if dirs := strings.Fields(string(env)); len(dirs) == 2 {
		t.Setenv("GOCACHE", dirs[0])
		t.Setenv("GOMODCACHE", dirs[1])
	}
	out := exampletest.Run(t, steps)
	for _, want := range []string{
		`{"records":[]}`, // the service before and after
		"plugin.setpoint.dev/dnsrecord condition met",
		"dnsrecord.example.setpoint.dev/www condition met",
		`"value":"192.0.2.10"`, // created
		`"value":"192.0.2.20"`, // updated, and repaired
		"DriftRepaired",
		"was changed outside Setpoint to 203.0.113.66 60",
		"the service answered 500 Internal Server Error",
		`"faults":`,
		"deleted record www.example.com A",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
