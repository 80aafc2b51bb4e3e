// Package realhost runs a built plugin module under Setpoint's real host
// from a plugin's own Go tests, through the setpoint binary: each call is
// `setpoint plugin call`, and Test is `setpoint plugin test`. It needs no
// server and no network, and it imports nothing of the server's module
// (which is not downloadable), so a plugin project outside the Setpoint
// repository tests what it ships:
//
//	m, err := realhost.Find("bin/widget.wasm")
//	resp, err := m.Reconcile(ctx, &abi.ReconcileRequest{Object: obj})
//
// The binary is $SETPOINT when set (a path, or a name looked up on PATH),
// else `setpoint` on PATH. Compiled
// modules are cached on disk by the binary, so repeated calls are quick.
package realhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// ErrNoBinary reports that the setpoint binary was not found.
var ErrNoBinary = errors.New("realhost: setpoint binary not found: set SETPOINT to its path or put it on PATH")

// Module is one built module (a .wasm file) and the binary that runs it.
type Module struct {
	// Setpoint is the path of the setpoint binary.
	Setpoint string
	// Wasm is the path of the module.
	Wasm string
}

// Find returns the module at wasm with the setpoint binary from $SETPOINT or
// PATH. It checks that both exist.
func Find(wasm string) (*Module, error) {
	bin := os.Getenv("SETPOINT")
	if bin == "" {
		bin = "setpoint"
	}
	bin, err := exec.LookPath(bin) // a bare name is looked up on PATH
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoBinary, err)
	}
	if _, err := os.Stat(wasm); err != nil {
		return nil, fmt.Errorf("realhost: module: %w (build it first: make build)", err)
	}
	return &Module{Setpoint: bin, Wasm: wasm}, nil
}

// Reconcile calls the module's reconcile export.
func (m *Module) Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	out, err := m.Call(ctx, abi.ExportReconcile, req.AppendJSON(nil))
	if err != nil {
		return nil, err
	}
	resp := new(abi.ReconcileResponse)
	if err := resp.UnmarshalJSON(out); err != nil {
		return nil, fmt.Errorf("realhost: reconcile response: %w\n%s", err, out)
	}
	return resp, nil
}

// Admit calls the module's admit export.
func (m *Module) Admit(ctx context.Context, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	out, err := m.Call(ctx, abi.ExportAdmit, req.AppendJSON(nil))
	if err != nil {
		return nil, err
	}
	resp := new(abi.AdmissionResponse)
	if err := resp.UnmarshalJSON(out); err != nil {
		return nil, fmt.Errorf("realhost: admission response: %w\n%s", err, out)
	}
	return resp, nil
}

// Finalize calls the module's finalize export.
func (m *Module) Finalize(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	out, err := m.Call(ctx, abi.ExportFinalize, req.AppendJSON(nil))
	if err != nil {
		return nil, err
	}
	resp := new(abi.FinalizeResponse)
	if err := resp.UnmarshalJSON(out); err != nil {
		return nil, fmt.Errorf("realhost: finalize response: %w\n%s", err, out)
	}
	return resp, nil
}

// Call runs `setpoint plugin call` for one export with request as its
// input and returns the response document. A failed call (a trap, a
// timeout, a missing export, a guest panic) is an error with the binary's
// message.
func (m *Module) Call(ctx context.Context, export string, request []byte) ([]byte, error) {
	return m.run(ctx, request, "plugin", "call", "--wasm", m.Wasm, "--export", export)
}

// Test runs `setpoint plugin test` on the module with args (--crd,
// --object, --children, --admission, ...) and returns its YAML report of
// what the server would store.
func (m *Module) Test(ctx context.Context, args ...string) ([]byte, error) {
	return m.run(ctx, nil, append([]string{"plugin", "test", m.Wasm}, args...)...)
}

func (m *Module) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, m.Setpoint, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return stdout.Bytes(), fmt.Errorf("setpoint %s: %s", strings.Join(args[:2], " "), msg)
	}
	return stdout.Bytes(), nil
}
