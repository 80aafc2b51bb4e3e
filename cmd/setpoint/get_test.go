package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// runCommand runs setpoint with args against a server that counts the
// requests it gets and answers each with 404.
func runCommand(t *testing.T, args ...string) (requests int64, err error) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(args, "--server", srv.URL, "--token", "t"))
	err = root.Execute()
	return n.Load(), err
}

// TestSelectorsAreUsageErrors: a label or field selector that does not
// parse is a mistake in the command line (exit 2), found before the server
// is asked anything, not an object the server rejected (exit 6).
func TestSelectorsAreUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "wg", "-l", "bad key="}, `invalid label selector "bad key="`},
		{[]string{"get", "wg", "-A", "-l", "env in (dev"}, `invalid label selector "env in (dev"`},
		{[]string{"get", "wg,wgp", "-l", "!!"}, `invalid label selector "!!"`},
		{[]string{"get", "wg", "-w", "-l", "x y"}, `invalid label selector "x y"`},
		{[]string{"get", "wg", "--field-selector", "bad"}, `invalid field selector "bad"`},
		{[]string{"get", "wg", "-o", "name", "--field-selector", "metadata.name~a"}, `invalid field selector "metadata.name~a"`},
		{[]string{"delete", "wg", "-l", "bad key="}, `invalid label selector "bad key="`},
		{[]string{"plugin", "list", "-l", "=x"}, `invalid label selector "=x"`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			requests, err := runCommand(t, tt.args...)
			if exitCode(err) != exitUsage {
				t.Errorf("exit %d, want %d: %v", exitCode(err), exitUsage, err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
			if requests != 0 {
				t.Errorf("%d requests sent; a selector that does not parse needs none", requests)
			}
		})
	}
}

// TestKubectlOnlyGetFlagsAreExplained: --sort-by and -o custom-columns,
// which kubectl get has and setpoint get does not, are usage errors that say
// so and point to kubectl, without contacting the server.
func TestKubectlOnlyGetFlagsAreExplained(t *testing.T) {
	for _, tt := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"get", "wg", "--sort-by", ".metadata.name"}, []string{"unknown flag: --sort-by", "does not sort", "kubectl get --sort-by"}},
		{[]string{"get", "wg", "--sort-by=.metadata.name"}, []string{"unknown flag: --sort-by", "kubectl get --sort-by"}},
		{[]string{"get", "wg", "-L", "env"}, []string{"-L", "--show-labels"}},
		{[]string{"get", "wg", "-o", "custom-columns=NAME:.metadata.name"}, []string{"does not support -o custom-columns", "kubectl", "jsonpath=TEMPLATE"}},
		{[]string{"get", "wg", "-o", "go-template={{.kind}}"}, []string{"does not support -o go-template", "jsonpath=TEMPLATE"}},
		{[]string{"get", "wg", "-o", "xml"}, []string{`unknown output format "xml"`, "jsonpath=TEMPLATE"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			requests, err := runCommand(t, tt.args...)
			if exitCode(err) != exitUsage {
				t.Errorf("exit %d, want %d: %v", exitCode(err), exitUsage, err)
			}
			for _, w := range tt.wants {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
			if requests != 0 {
				t.Errorf("%d requests sent", requests)
			}
		})
	}
}
