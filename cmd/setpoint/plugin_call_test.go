package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/host/hosttest"
)

// runCmd runs the setpoint command line args with stdin and returns its
// output and exit code.
func runCmd(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.Execute()
	if err != nil {
		errOut.WriteString("error: " + err.Error())
	}
	return out.String(), errOut.String(), exitCode(err)
}

func TestPluginCall(t *testing.T) {
	faulty := hosttest.Path(t, "faulty")
	cache := hosttest.CacheDir(t)
	req := func(mode string) string {
		return `{"object":{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"}},"config":{"mode":"` + mode + `"}}`
	}
	tests := []struct {
		name    string
		export  string
		stdin   string
		code    int
		stdout  string // a substring of the response, when code is 0
		message string // a substring of stderr, when code is not 0
	}{
		{name: "response", export: "reconcile", stdin: req("ok"), stdout: `"status"`},
		{name: "guest reads through the host", export: "reconcile",
			stdin: `{"object":{},"config":{"mode":"get","apiVersion":"v1","kind":"Secret","name":"x"}}`, stdout: `"found": false`},
		{name: "spin past the deadline", export: "reconcile", stdin: req("loop"), code: exitFailure, message: "reconcile of"},
		{name: "panic", export: "reconcile", stdin: req("panic"), code: exitFailure, message: "panic"},
		{name: "invalid status document", export: "reconcile", stdin: req("badjson"), code: exitFailure, message: "reconcile of"},
		{name: "missing export", export: "admit", stdin: `{}`, code: exitFailure, message: "has no admit export (it exports: reconcile)"},
		{name: "request not JSON", export: "reconcile", stdin: `{"object":`, code: exitInvalid, message: "reading the reconcile request"},
		{name: "unknown export", export: "init", stdin: `{}`, code: exitUsage, message: "want reconcile, admit or finalize"},
	}
	// The Extism ABI runs through the same command.
	out, errOut, code := runCmd(t, `{"object":{"metadata":{"name":"w","namespace":"default"},"spec":{"name":"W","size":"small"}}}`,
		"plugin", "call", "--wasm", hosttest.Path(t, "extismwidget"), "--export", "reconcile", "--cache-dir", cache)
	if code != 0 || !strings.Contains(out, `"w-config"`) {
		t.Errorf("extism guest: exit %d\n%s%s", code, out, errOut)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCmd(t, tt.stdin, "plugin", "call", "--wasm", faulty, "--export", tt.export,
				"--cache-dir", cache, "--call-timeout", "300ms")
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			if code == 0 {
				if !json.Valid([]byte(out)) || !strings.Contains(out, tt.stdout) {
					t.Fatalf("response %s, want JSON with %q", out, tt.stdout)
				}
				return
			}
			if !strings.Contains(errOut, tt.message) || out != "" {
				t.Fatalf("stderr %q, want %q; stdout %q", errOut, tt.message, out)
			}
		})
	}
}
