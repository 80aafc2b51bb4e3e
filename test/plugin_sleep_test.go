package test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestSleepingAdmissionHonoursTimeout: an admission plugin that sleeps
// (time.Sleep, WASI poll_oneoff) for a minute under a 1s call timeout held
// API writes for two minutes; the write now fails at the timeout, and the
// next write finds an instance to serve it.
func TestSleepingAdmissionHonoursTimeout(t *testing.T) {
	sleeper := builtModule(t, "sleeper")
	s := testserver.Start(t, testserver.Options{})
	ok(t, s, "apply", "-f", filepath.Join(writeFiles(t, map[string]string{"crd.yaml": widgetCRD}), "crd.yaml"))
	d := mustUpload(t, s, sleeper)
	applyPlugin(t, s, pluginManifest("sleepy", d, `  admission:
  - resources: [widgets.example.setpoint.dev]
    operations: [CREATE]
    type: Validating
  limits:
    callTimeout: 1s
    poolSize: 1
  config:
    sleep: 60s
`))
	waitPlugin(t, s, "sleepy", 2*time.Minute, loadedWith(d))
	for i, name := range []string{"first", "second"} {
		widget := "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: " + name + ", namespace: default}\nspec: {name: " + name + ", size: small}\n"
		t0 := time.Now()
		out, errOut, err := s.KubectlInput(widget, "apply", "-f", "-")
		took := time.Since(t0)
		t.Logf("write %d answered after %v: %v %s%s", i+1, took, err, out, errOut)
		if err == nil || !strings.Contains(errOut, "timeout") {
			t.Fatalf("write %d: %v %s%s, want a refusal naming the timeout", i+1, err, out, errOut)
		}
		if took > 15*time.Second {
			t.Fatalf("write %d took %v; the call timeout is 1s", i+1, took)
		}
	}
}
