package test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestKubectlGetAllOnExamplesServer: on a server started with --examples
// (as `make run` starts it), the example kinds are in the category "all",
// as a Kubernetes CRD author puts their kinds, so `kubectl get all` lists
// a Widget, and with nothing to list says so rather than failing.
func TestKubectlGetAllOnExamplesServer(t *testing.T) {
	s := testserver.Start(t, testserver.Options{Args: []string{"--examples", "--examples-dir", filepath.Join("..", "examples")}, LogLevel: "warn"})
	testsupport.Eventually(t, time.Minute, "the example kinds served", func() bool {
		_, _, err := s.Kubectl("get", "widgets,dnsrecords,replicagroups")
		return err == nil
	})
	if out, errOut, err := s.Kubectl("get", "all"); err != nil || out != "" || errOut != "No resources found in default namespace.\n" {
		t.Errorf("kubectl get all with nothing to list: %v\nstdout %q\nstderr %q", err, out, errOut)
	}
	s.MustKubectl("", "apply", "-f", filepath.Join("..", "examples", "widget", "widget.yaml"))
	out, errOut, err := s.Kubectl("get", "all", "-o", "name")
	if err != nil || !strings.Contains(out, "widget.example.setpoint.dev/demo\n") {
		t.Errorf("kubectl get all -o name: %v\nstdout %q\nstderr %q; want widget.example.setpoint.dev/demo", err, out, errOut)
	}
	out, errOut, err = s.Kubectl("api-resources", "--categories=all", "-o", "name")
	if want := "dnsrecords.example.setpoint.dev\nreplicagroups.example.setpoint.dev\nwidgets.example.setpoint.dev\n"; err != nil || out != want {
		t.Errorf("kubectl api-resources --categories=all: %v\nstdout %q\nstderr %q; want %q", err, out, errOut, want)
	}
}
