package test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestCLIVerbs covers what kubectl users reach for: strict field
// validation and the server's warnings, and the wait, patch, scale and
// edit verbs, against a real server with the real binary.
func TestCLIVerbs(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	dir := writeFiles(t, map[string]string{
		"widget-crd.yaml": widgetCRD,
		"gamma.yaml": `apiVersion: example.setpoint.dev/v1
kind: Widget
metadata: {name: gamma}
spec: {name: Gamma, size: small}
`,
		"typo.yaml": `apiVersion: example.setpoint.dev/v1
kind: Widget
metadata: {name: typo}
spec: {name: Typo, size: small, colour: red}
`,
	})
	ok(t, s, "apply", "-f", filepath.Join(dir, "widget-crd.yaml"))
	ok(t, s, "apply", "-f", filepath.Join(dir, "gamma.yaml"))
	typo := filepath.Join(dir, "typo.yaml")

	t.Run("apply refuses an unknown field by default", func(t *testing.T) {
		fails(t, s, nil, "", 6, []string{"colour"}, "apply", "-f", typo)
		fails(t, s, nil, "", 6, []string{"colour"}, "apply", "--server-side", "-f", typo)
		r := runCLI(t, s, nil, "", "get", "widget", "typo")
		if r.code != 4 {
			t.Errorf("a refused object was stored: exit %d\n%s", r.code, r.stdout)
		}
	})

	t.Run("apply --validate=warn prints the server's warning", func(t *testing.T) {
		r := runCLI(t, s, nil, "", "apply", "--validate=warn", "-f", typo)
		if r.code != 0 || !strings.Contains(r.stdout, "widget.example.setpoint.dev/typo created") {
			t.Fatalf("apply --validate=warn: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, `Warning: unknown field "spec.colour"`) {
			t.Errorf("apply --validate=warn: stderr lacks the warning:\n%s", r.stderr)
		}
		if got := ok(t, s, "get", "widget", "typo", "-o", "jsonpath={.spec}"); strings.Contains(got, "colour") {
			t.Errorf("unknown field kept: %s", got)
		}
	})

	t.Run("apply --validate=ignore is silent", func(t *testing.T) {
		ok(t, s, "delete", "widget", "typo")
		r := runCLI(t, s, nil, "", "apply", "--validate=ignore", "-f", typo)
		if r.code != 0 || strings.Contains(r.stderr, "Warning") {
			t.Errorf("apply --validate=ignore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		fails(t, s, nil, "", 2, []string{`--validate "maybe"`}, "apply", "--validate=maybe", "-f", typo)
	})
}

// TestCLIUnknownNames checks that a mistyped subcommand or resource is a
// usage error that suggests the right name.
func TestCLIUnknownNames(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	dir := writeFiles(t, map[string]string{"widget-crd.yaml": widgetCRD})
	ok(t, s, "apply", "-f", filepath.Join(dir, "widget-crd.yaml"))
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		wants []string
	}{
		{name: "root", args: []string{"gett"}, code: 2, wants: []string{`unknown command "gett"`, "Did you mean this?", "get"}},
		{name: "group", args: []string{"plugin", "lst"}, code: 2, wants: []string{`unknown command "lst" for "setpoint plugin"`, "list"}},
		{name: "group without a near name", args: []string{"plugin", "frobnicate"}, code: 2, wants: []string{`unknown command "frobnicate" for "setpoint plugin"`, "setpoint plugin --help"}},
		{name: "resource", args: []string{"get", "widgts"}, code: 4, wants: []string{`resource named "widgts" (did you mean "widgets"?)`}},
		{name: "resource by kind", args: []string{"get", "widgett"}, code: 4, wants: []string{`did you mean "widgets"?`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fails(t, s, nil, "", tc.code, tc.wants, tc.args...)
		})
	}
	if r := runCLI(t, s, nil, "", "plugin"); r.code != 0 || !strings.Contains(r.stdout, "Available Commands") {
		t.Errorf("setpoint plugin: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, s, nil, "", "get", "zz"); strings.Contains(r.stderr, "did you mean") {
		t.Errorf("setpoint get zz suggests a name two edits away:\n%s", r.stderr)
	}
}

// TestCLIConnection checks the ways of naming the server that a new user
// gets wrong, and the help pages' connection flags.
func TestCLIConnection(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	httpURL := "http://" + strings.TrimPrefix(s.URL, "https://")
	fails(t, s, nil, "", 2, []string{"speaks HTTPS", "use " + s.URL}, "get", "ns", "--server", httpURL, "--token", s.Token)
	fails(t, s, []string{"KUBECONFIG=/missing/kubeconfig"}, "", 2, []string{"KUBECONFIG=/missing/kubeconfig: the file does not exist"}, "get", "ns")

	// The three variables alone reach the server, without a kubeconfig.
	env := []string{"KUBECONFIG=/missing/kubeconfig", "SETPOINT_SERVER=" + s.URL, "SETPOINT_TOKEN=" + s.Token,
		"SETPOINT_CERTIFICATE_AUTHORITY=" + filepath.Join(s.DataDir, "pki", "ca.crt")}
	if r := runCLI(t, s, env, "", "get", "ns", "default", "-o", "name"); r.code != 0 || !strings.Contains(r.stdout, "namespace/default") {
		t.Errorf("SETPOINT_SERVER, _TOKEN and _CERTIFICATE_AUTHORITY: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Without the CA the server's certificate is not trusted.
	fails(t, s, env[:3], "", 3, []string{"unknown authority"}, "get", "ns")

	for _, verb := range []string{"get", "apply", "wait", "version"} {
		help := ok(t, s, verb, "--help")
		if !strings.Contains(help, "--kubeconfig FILE") || strings.Contains(help, "--kubeconfig setpoint") {
			t.Errorf("setpoint %s --help renders the kubeconfig flag wrongly:\n%s", verb, help)
		}
	}
}
