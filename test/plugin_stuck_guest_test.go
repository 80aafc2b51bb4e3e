package test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// A Plugin whose guest is stuck in a call (sleeping past any reasonable
// wait) holds up nothing else: deleting it lets another Plugin's controller
// start at once, and SIGTERM ends the server within --shutdown-timeout,
// abandoning the stuck call.
func TestStuckGuestBlocksNoOtherPluginNorShutdown(t *testing.T) {
	sleeper, v1 := wasmModule(t, "sleeper"), wasmModule(t, "lifecyclev1")
	s := testserver.Start(t, testserver.Options{Args: []string{"--shutdown-timeout", "3s"}})
	dir := writeFiles(t, map[string]string{"widgets.yaml": widgetCRD, "gadgets.yaml": gadgetCRD})
	ok(t, s, "apply", "-f", dir+"/widgets.yaml")
	ok(t, s, "apply", "-f", dir+"/gadgets.yaml")
	gadget := "apiVersion: example.setpoint.dev/v1\nkind: Gadget\nmetadata: {name: g, namespace: default}\nspec: {size: small}\n"
	stick := func(name string) {
		t.Helper()
		ok(t, s, "plugin", "install", name, "--wasm", sleeper, "--reconcile", "gadgets", "--call-timeout", "25s", "--config", "sleep=25s")
		time.Sleep(time.Second) // the reconcile of g is in the guest now
	}
	if out, errOut, err := s.KubectlInput(gadget, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
	stick("stuck")

	if out, errOut, err := s.Kubectl("delete", "plugin", "stuck", "--wait=false"); err != nil {
		t.Fatalf("kubectl delete plugin: %v\n%s%s", err, out, errOut)
	}
	start := time.Now()
	ok(t, s, "plugin", "install", "quick", "--wasm", v1, "--reconcile", "widgets")
	if out, errOut, err := s.KubectlInput(lifeWidget("w", false), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
	waitWidget(t, s, "w", "reconciled by v1")
	took := time.Since(start)
	t.Logf("another Plugin reconciled %v after the stuck one was deleted", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("another Plugin's controller started %v after the stuck one was deleted", took)
	}

	stick("stuck2")
	start = time.Now()
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := s.Wait(10 * time.Second)
	took = time.Since(start)
	t.Logf("SIGTERM with a call stuck in a guest: exited in %v (--shutdown-timeout 3s): %v", took.Round(time.Millisecond), err)
	if err != nil && strings.Contains(err.Error(), "still running") {
		t.Fatalf("SIGTERM: %v", err)
	}
	if took > 6*time.Second {
		t.Errorf("SIGTERM took %v with --shutdown-timeout 3s", took)
	}
}

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
