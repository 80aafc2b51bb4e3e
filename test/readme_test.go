package test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/examples/exampletest"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestReadmeUsingIt runs the `sh` blocks of the README's "Using it" section
// as written, in order, against a plain server (as the README starts it)
// and against a `make run` server (--examples), whose plugin is installed
// already, and checks what they printed.
func TestReadmeUsingIt(t *testing.T) {
	steps := exampletest.Sections(t, "../README.md")["Using it"]
	if len(steps) == 0 {
		t.Fatal(`README.md has no sh blocks under "## Using it"`)
	}
	wants := []string{
		"customresourcedefinition.apiextensions.k8s.io/widgets.example.setpoint.dev",
		"widget.example.setpoint.dev/demo condition met",
		"Demo widget",
		"Ready",
		"widget.example.setpoint.dev/demo deleted",
		"Client Version: ",
		"Server Version: ",
	}
	check := func(t *testing.T, out string) {
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		for _, bad := range []string{"error:", "Warning:"} {
			if strings.Contains(out, bad) {
				t.Errorf("the walkthrough printed %q:\n%s", bad, out)
			}
		}
	}
	t.Run("plain server", func(t *testing.T) {
		check(t, exampletest.Run(t, steps))
	})
	t.Run("make run server", func(t *testing.T) {
		s := examplesServer(t)
		check(t, exampletest.RunOn(t, s, steps))
	})
}

// TestReplicaGroupWalkthroughOnMakeRunServer runs the replicagroup
// walkthrough's setpoint section against a server that installed the
// example plugins already, as `make run` does.
func TestReplicaGroupWalkthroughOnMakeRunServer(t *testing.T) {
	steps := exampletest.Sections(t, "../examples/replicagroup/README.md")["With setpoint"]
	s := examplesServer(t)
	out := exampletest.RunOn(t, s, steps)
	for _, w := range []string{"web-2", "Ready"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// examplesServer starts a server as `make run` does and waits for its
// "examples ready" banner.
func examplesServer(t *testing.T) *testserver.Server {
	t.Helper()
	if err := hosttest.Build(); err != nil {
		t.Fatal(err)
	}
	root, err := hosttest.Root()
	if err != nil {
		t.Fatal(err)
	}
	s := testserver.Start(t, testserver.Options{Args: []string{"--examples", "--examples-dir", filepath.Join(root, "examples")}})
	testsupport.Poll(t, 3*time.Minute, "the examples banner", func() (bool, string) {
		logs := s.Logs()
		return strings.Contains(logs, "examples ready: kubectl get widgets"), "\n" + logs
	})
	return s
}
