package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
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
		"gizmo-crd.yaml": gizmoCRD,
		"gizmo.yaml": `apiVersion: example.setpoint.dev/v1
kind: Gizmo
metadata: {name: g1}
spec: {replicas: 1}
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

	t.Run("patch", func(t *testing.T) {
		out := ok(t, s, "patch", "widget", "gamma", "-p", `{"spec":{"size":"medium"}}`)
		if out != "widget.example.setpoint.dev/gamma patched\n" {
			t.Errorf("patch printed %q", out)
		}
		if out := ok(t, s, "patch", "widget/gamma", "-p", "spec: {size: medium}"); !strings.Contains(out, "patched (no change)") {
			t.Errorf("a patch that changes nothing printed %q", out)
		}
		ok(t, s, "patch", "widget/gamma", "--type", "json", "-p", `[{"op":"replace","path":"/spec/name","value":"Gamma 2"}]`)
		if got := ok(t, s, "get", "widget", "gamma", "-o", "jsonpath={.spec.name}/{.spec.size}"); got != "Gamma 2/medium" {
			t.Errorf("after patches: %q", got)
		}
		fails(t, s, nil, "", 2, []string{"strategic merge patches are for Kubernetes' built-in kinds", "--type merge"},
			"patch", "widget", "gamma", "--type", "strategic", "-p", `{"spec":{"size":"large"}}`)
		fails(t, s, nil, "", 6, []string{"spec.size"}, "patch", "widget", "gamma", "-p", `{"spec":{"size":"huge"}}`)
		fails(t, s, nil, "", 6, []string{"colour"}, "patch", "widget", "gamma", "-p", `{"spec":{"colour":"red"}}`)
		fails(t, s, nil, "", 4, []string{"nothere"}, "patch", "widget", "nothere", "-p", `{"spec":{"size":"large"}}`)
		fails(t, s, nil, "", 2, []string{"--type json"}, "patch", "widget", "gamma", "-p", `[{"op":"remove","path":"/spec/name"}]`)
	})

	t.Run("wait", func(t *testing.T) {
		out := ok(t, s, "wait", "--for=jsonpath={.spec.size}=medium", "widget/gamma")
		if out != "widget.example.setpoint.dev/gamma condition met\n" {
			t.Errorf("wait --for=jsonpath printed %q", out)
		}
		fails(t, s, nil, "", 1, []string{"timed out waiting for the condition", "widgets.example.setpoint.dev/gamma"},
			"wait", "--for=condition=Ready", "widget", "gamma", "--timeout=1s")
		ok(t, s, "patch", "widget", "gamma", "--subresource", "status", "-p",
			`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Done","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
		ok(t, s, "wait", "--for=condition=Ready", "widget", "gamma", "--timeout=10s")
		fails(t, s, nil, "", 1, []string{"timed out"}, "wait", "--for=condition=Ready=False", "widget/gamma", "--timeout=1s")
		fails(t, s, nil, "", 4, []string{"not found"}, "wait", "--for=condition=Ready", "widget/nothere")
		if out := ok(t, s, "wait", "--for=delete", "widget/nothere"); !strings.Contains(out, "condition met") {
			t.Errorf("wait --for=delete of an absent object printed %q", out)
		}
		fails(t, s, nil, "", 2, []string{"--for"}, "wait", "widget/gamma")
		fails(t, s, nil, "", 2, []string{"--for=ready"}, "wait", "--for=ready", "widget/gamma")

		// A delete that the wait sees happen.
		done := make(chan cliResult, 1)
		go func() { done <- runCLI(t, s, nil, "", "wait", "--for=delete", "widget/typo", "--timeout=30s") }()
		ok(t, s, "delete", "widget", "typo")
		if r := <-done; r.code != 0 || !strings.Contains(r.stdout, "widget.example.setpoint.dev/typo condition met") {
			t.Errorf("wait --for=delete: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("scale", func(t *testing.T) {
		ok(t, s, "apply", "-f", filepath.Join(dir, "gizmo-crd.yaml"))
		ok(t, s, "apply", "-f", filepath.Join(dir, "gizmo.yaml"))
		if out := ok(t, s, "scale", "gizmo", "g1", "--replicas=3"); out != "gizmo.example.setpoint.dev/g1 scaled\n" {
			t.Errorf("scale printed %q", out)
		}
		if got := ok(t, s, "get", "gizmo", "g1", "-o", "jsonpath={.spec.replicas}"); got != "3" {
			t.Errorf("spec.replicas after scale: %q", got)
		}
		fails(t, s, nil, "", 5, []string{"has 3 replicas, not 7"}, "scale", "gizmo/g1", "--replicas=1", "--current-replicas=7")
		ok(t, s, "scale", "gizmo/g1", "--replicas=1", "--current-replicas=3")
		fails(t, s, nil, "", 4, []string{"no scale subresource"}, "scale", "widget", "gamma", "--replicas=2")
		fails(t, s, nil, "", 2, []string{"--replicas"}, "scale", "gizmo", "g1")
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
		{name: "group, an alias's near name", args: []string{"plugin", "delet"}, code: 2, wants: []string{`unknown command "delet" for "setpoint plugin"`, "Did you mean this?\n\tdelete"}},
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

// gizmoCRD is a kind with the scale subresource.
var gizmoCRD = testsupport.CRD{
	Kind: "Gizmo", Status: true, Scale: `{specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}`,
	Schema: `
type: object
properties:
  spec:
    type: object
    properties:
      replicas: {type: integer}
  status:
    type: object
    properties:
      replicas: {type: integer}
`,
}.String()

// TestCLIEdit runs setpoint edit with editors that are shell scripts: each
// keeps a copy of every file it was given (seen-N), so that the test sees
// what a person would have seen.
func TestCLIEdit(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	bin, err := testserver.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := writeFiles(t, map[string]string{
		"widget-crd.yaml": widgetCRD,
		"delta.yaml": `apiVersion: example.setpoint.dev/v1
kind: Widget
metadata: {name: delta}
spec: {name: Delta, size: small}
`,
		// Every editor counts its runs and keeps what it was shown.
		"prelude.sh": `n=$(( $(cat "$EDIR/n" 2>/dev/null || echo 0) + 1 )); echo $n > "$EDIR/n"; cp "$1" "$EDIR/seen-$n"` + "\n",
	})
	ok(t, s, "apply", "-f", filepath.Join(dir, "widget-crd.yaml"), "-f", filepath.Join(dir, "delta.yaml"))
	size := func() string { return ok(t, s, "get", "widget", "delta", "-o", "jsonpath={.spec.name}/{.spec.size}") }
	edit := func(t *testing.T, script string) (cliResult, func(int) string) {
		t.Helper()
		edir := t.TempDir()
		path := filepath.Join(edir, "editor.sh")
		body := "set -e\n. " + filepath.Join(dir, "prelude.sh") + "\n" + script + "\n"
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, s, []string{"KUBE_EDITOR=sh " + path, "EDIR=" + edir, "SETPOINT=" + bin}, "", "edit", "widget", "delta")
		return r, func(n int) string {
			b, _ := os.ReadFile(filepath.Join(edir, fmt.Sprintf("seen-%d", n)))
			return string(b)
		}
	}

	t.Run("saved", func(t *testing.T) {
		r, seen := edit(t, `sed -i 's/size: small/size: large/' "$1"`)
		if r.code != 0 || r.stdout != "widget.example.setpoint.dev/delta edited\n" {
			t.Fatalf("edit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if got := size(); got != "Delta/large" {
			t.Errorf("after edit: %s", got)
		}
		if first := seen(1); !strings.HasPrefix(first, "# Edit the object below") || strings.Contains(first, "managedFields") {
			t.Errorf("the editor was shown:\n%s", first)
		}
	})

	t.Run("unchanged cancels", func(t *testing.T) {
		r, _ := edit(t, `true`)
		if r.code != 0 || !strings.Contains(r.stderr, "Edit cancelled, no changes made.") {
			t.Errorf("edit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("invalid reopens with the error on top", func(t *testing.T) {
		r, seen := edit(t, `if [ $n = 1 ]; then sed -i 's/size: large/size: huge/' "$1"; else sed -i 's/size: huge/size: medium/' "$1"; fi`)
		if r.code != 0 || !strings.Contains(r.stdout, "edited") {
			t.Fatalf("edit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		second := seen(2)
		errAt, body := strings.Index(second, "spec.size"), strings.Index(second, "\napiVersion:")
		if errAt < 0 || body < 0 || errAt > body || !strings.Contains(second, "size: huge") {
			t.Errorf("the reopened file lacks the error above the edits:\n%s", second)
		}
		if got := size(); got != "Delta/medium" {
			t.Errorf("after edit: %s", got)
		}
	})

	t.Run("invalid saved again gives up", func(t *testing.T) {
		r, _ := edit(t, `if [ $n = 1 ]; then sed -i 's/size: medium/size: huge/' "$1"; fi`)
		if r.code != 1 || !strings.Contains(r.stderr, "no valid changes were saved") {
			t.Errorf("edit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if got := size(); got != "Delta/medium" {
			t.Errorf("after a refused edit: %s", got)
		}
	})

	t.Run("conflict reopens with the edits over the latest version", func(t *testing.T) {
		r, seen := edit(t, `if [ $n = 1 ]; then "$SETPOINT" patch widget delta -p '{"spec":{"name":"Changed"}}' >/dev/null; sed -i 's/size: medium/size: small/' "$1"; fi`)
		if r.code != 0 || !strings.Contains(r.stdout, "edited") {
			t.Fatalf("edit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if second := seen(2); !strings.Contains(second, "changed while you edited it") || !strings.Contains(second, "name: Changed") ||
			!strings.Contains(second, "size: small") {
			t.Errorf("the reopened file:\n%s", second)
		}
		if got := size(); got != "Changed/small" {
			t.Errorf("after edit: %s, want both changes", got)
		}
	})
}
