package test

import (
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
