package realhost_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/realhost"
)

// The binary's own behaviour is tested in the main module (cmd/setpoint) and
// end to end by test/authoring_test.go, whose generated project runs this
// package against the real binary; here a stand-in script checks what this
// package sends and how it reads answers and failures.
const standIn = `#!/bin/sh
case "$2" in
call)
  input=$(cat)
  case "$input" in
  *'"name":"boom"'*) echo "error: reconcile of $4 failed: host: trap" >&2; exit 1 ;;
  esac
  echo "{\"status\":{\"args\":\"$*\"}}" ;;
test) echo "object: {}"; echo "args: $*" ;;
esac
`

func TestModule(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "setpoint")
	wasm := filepath.Join(dir, "p.wasm")
	if err := os.WriteFile(bin, []byte(standIn), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wasm, []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SETPOINT", bin)
	m, err := realhost.Find(wasm)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp, err := m.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(`{"metadata":{"name":"ok"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Status.String("args"); got != "plugin call --wasm "+wasm+" --export reconcile" {
		t.Errorf("ran %q", got)
	}
	_, err = m.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(`{"metadata":{"name":"boom"}}`)})
	if err == nil || !strings.Contains(err.Error(), "host: trap") {
		t.Errorf("failed call: %v, want the binary's message", err)
	}
	out, err := m.Test(ctx, "--crd", "crd.yaml")
	if err != nil || !strings.Contains(string(out), "args: plugin test "+wasm+" --crd crd.yaml") {
		t.Errorf("Test: %v\n%s", err, out)
	}

	t.Setenv("SETPOINT", filepath.Join(dir, "missing"))
	if _, err := realhost.Find(wasm); !errors.Is(err, realhost.ErrNoBinary) {
		t.Errorf("missing binary: %v", err)
	}
	t.Setenv("SETPOINT", bin)
	if _, err := realhost.Find(filepath.Join(dir, "none.wasm")); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("missing module: %v", err)
	}
}
