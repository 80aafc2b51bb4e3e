package test

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestCLIPluginLifecycle runs install (idempotent), apply, upgrade with
// --privileged, the failures waiting will not mend, and uninstall with the
// finalizer it leaves, against a real server.
func TestCLIPluginLifecycle(t *testing.T) {
	widget, noAdmit := wasmModule(t, "widget-plugin"), wasmModule(t, "lifecyclenoadmit")
	s := testserver.Start(t, testserver.Options{LogLevel: "warn"})
	examples := filepath.Join("..", "examples", "widget")
	ok(t, s, "apply", "-f", filepath.Join(examples, "crd.yaml"), "-f", filepath.Join(examples, "provision-crd.yaml"))
	install := []string{"plugin", "install", "widget", "--wasm", widget, "--reconcile", "widgets", "--owns", "widgetprovisions"}

	t.Run("install is idempotent", func(t *testing.T) {
		out := ok(t, s, install...)
		if !regexp.MustCompile(`^plugin.setpoint.dev/widget created \(module sha256:[0-9a-f]{64}\)\nplugin.setpoint.dev/widget loaded\n$`).MatchString(out) {
			t.Errorf("first install:\n%s", out)
		}
		out = ok(t, s, install...)
		if !regexp.MustCompile(`^plugin.setpoint.dev/widget unchanged \(module sha256:[0-9a-f]{64}\)\nplugin.setpoint.dev/widget loaded\n$`).MatchString(out) {
			t.Errorf("second install of the same spec and module:\n%s", out)
		}
		// The same spec in another spelling: kind and short names, owns
		// as the qualified resource.
		if out := ok(t, s, "plugin", "install", "widget", "--wasm", widget, "--reconcile", "Widget", "--owns", "widgetprovisions.example.setpoint.dev"); !strings.Contains(out, "unchanged") {
			t.Errorf("install of the same spec spelled otherwise:\n%s", out)
		}
		fails(t, s, nil, "", 5, []string{`plugin "widget" exists already with another config`, "plugin upgrade widget", "plugin apply widget"},
			append(install, "--config", "size=1")...)
		fails(t, s, nil, "", 5, []string{"another module", "plugin upgrade"},
			"plugin", "install", "widget", "--wasm", noAdmit, "--reconcile", "widgets", "--owns", "widgetprovisions")
	})

	t.Run("apply sets the whole spec, privileged too", func(t *testing.T) {
		out := ok(t, s, append(install[:0:0], "plugin", "apply", "widget", "--wasm", widget, "--reconcile", "widgets", "--owns", "widgetprovisions", "--config", "size=1", "--privileged")...)
		if !strings.HasPrefix(out, "plugin.setpoint.dev/widget configured (module sha256:") || !strings.HasSuffix(out, "loaded\n") {
			t.Errorf("apply with a new config:\n%s", out)
		}
		if got := ok(t, s, "get", "plugin", "widget", "-o", "jsonpath={.spec.config.size} {.spec.privileged}"); got != "1 true" {
			t.Errorf("after apply: config.size and privileged %q, want \"1 true\"", got)
		}
		if out := ok(t, s, "plugin", "describe", "widget"); !regexp.MustCompile(`(?m)^Privileged:\s+true$`).MatchString(out) {
			t.Errorf("plugin describe of a privileged plugin:\n%s", out)
		}
		out = ok(t, s, "plugin", "apply", "widget", "--wasm", widget, "--reconcile", "widgets", "--owns", "widgetprovisions", "--config", "size=1", "--privileged")
		if !strings.Contains(out, "unchanged") {
			t.Errorf("apply of the same spec:\n%s", out)
		}
		out = ok(t, s, "plugin", "upgrade", "widget", "--wasm", widget, "--privileged=false")
		if !strings.HasPrefix(out, "plugin.setpoint.dev/widget configured (privileged: false)\n") {
			t.Errorf("upgrade --privileged=false:\n%s", out)
		}
		if got := ok(t, s, "get", "plugin", "widget", "-o", "jsonpath={.spec.privileged}"); got != "false" {
			t.Errorf("after upgrade --privileged=false: privileged %q", got)
		}
		// --workers sets spec.reconcile.workers, which describe shows.
		ok(t, s, "plugin", "apply", "widget", "--wasm", widget, "--reconcile", "widgets", "--owns", "widgetprovisions", "--workers", "6")
		if got := ok(t, s, "get", "plugin", "widget", "-o", "jsonpath={.spec.reconcile.workers}"); got != "6" {
			t.Errorf("after apply --workers 6: spec.reconcile.workers %q", got)
		}
		if out := ok(t, s, "plugin", "describe", "widget"); !strings.Contains(out, "reconciles widgets.example.setpoint.dev, owning widgetprovisions.example.setpoint.dev, 6 at once") {
			t.Errorf("plugin describe with 6 workers:\n%s", out)
		}
		fails(t, s, nil, "", 2, []string{"--workers", "needs --reconcile"}, "plugin", "apply", "widget", "--wasm", widget, "--admit", "widgets", "--workers", "6")
		// Back to the install's spec: flags left out leave the spec.
		ok(t, s, append([]string{"plugin", "apply"}, install[2:]...)...)
		if out := ok(t, s, install...); !strings.Contains(out, "unchanged") {
			t.Errorf("install after apply back to its spec:\n%s", out)
		}
	})

	t.Run("a failure waiting will not mend fails at once", func(t *testing.T) {
		start := time.Now()
		fails(t, s, nil, "", 5, []string{"plugin rival cannot reconcile: ReconcileConflict", `"widget"`,
			"the Plugin rival was created and stays", "setpoint plugin uninstall rival"},
			"plugin", "install", "rival", "--wasm", widget, "--reconcile", "widgets")
		fails(t, s, nil, "", 6, []string{"plugin strict failed to load: MissingExport", "does not export admit",
			"the Plugin strict was created and stays"},
			"plugin", "install", "strict", "--wasm", noAdmit, "--admit", "widgets")
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("the two failures took %v; they should not wait for the 2-minute timeout", took)
		}
		// An upload the server refuses creates nothing and says so (a
		// module not uploaded before: the check runs on new uploads).
		fails(t, s, nil, "", 6, []string{"over limit of 16 pages", "no Plugin was created"},
			"plugin", "install", "small", "--wasm", wasmModule(t, "widget"), "--admit", "widgets", "--memory-pages", "16")
		fails(t, s, nil, "", 4, []string{"small"}, "get", "plugin", "small")
		r := runCLI(t, s, nil, "", "plugin", "delete", "rival")
		if r.code != 0 || r.stdout != "plugin.setpoint.dev/rival deleted\n" ||
			!strings.Contains(r.stderr, "no widgets.example.setpoint.dev object carries the finalizer setpoint.dev/rival") {
			t.Errorf("plugin delete rival: %+v", r)
		}
		if r := runCLI(t, s, nil, "", "plugin", "uninstall", "strict"); r.code != 0 || r.stdout != "plugin.setpoint.dev/strict deleted\n" || r.stderr != "" {
			t.Errorf("plugin uninstall strict (admission only): %+v", r)
		}
		fails(t, s, nil, "", 4, []string{`no plugin "rival"`, "plugin list"}, "plugin", "uninstall", "rival")
		fails(t, s, nil, "", 4, []string{"rival"}, "get", "plugin", "rival")
	})

	t.Run("uninstall says which objects keep its finalizer", func(t *testing.T) {
		ok(t, s, "apply", "-f", filepath.Join(examples, "widget.yaml"))
		testsupport.Eventually(t, time.Minute, "widget demo Ready", func() bool {
			return ok(t, s, "get", "widget", "demo", "-o", "jsonpath={.status.state}") == "Ready"
		})
		r := runCLI(t, s, nil, "", "plugin", "uninstall", "widget")
		if r.code != 0 || r.stdout != "plugin.setpoint.dev/widget deleted\n" {
			t.Fatalf("uninstall widget: %+v", r)
		}
		fails(t, s, nil, "", 4, []string{"widget"}, "get", "plugin", "widget")
		if !strings.Contains(r.stderr, "the finalizer setpoint.dev/widget stays on 1 widgets.example.setpoint.dev object(s), 0 of them being deleted") {
			t.Errorf("uninstall does not say the widget keeps the finalizer:\n%s", r.stderr)
		}
		release := regexp.MustCompile(`(?m)^  (kubectl patch widgets.example.setpoint.dev demo -n default --type=json -p '.*')$`).FindStringSubmatch(r.stderr)
		if release == nil {
			t.Fatalf("no release command for widget demo:\n%s", r.stderr)
		}
		// The widget's deletion waits for the finalizer; the printed
		// command releases it.
		ok(t, s, "delete", "widget", "demo")
		if got := ok(t, s, "get", "widget", "demo", "-o", "jsonpath={.metadata.finalizers}"); !strings.Contains(got, "setpoint.dev/widget") {
			t.Fatalf("widget demo lost its finalizer before the release: %q", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := s.Command(ctx, "sh", "-c", release[1]).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", release[1], err, out)
		}
		ok(t, s, "delete", "widget", "demo", "--wait", "--ignore-not-found")
		fails(t, s, nil, "", 4, []string{"demo"}, "get", "widget", "demo")
	})
}

// TestCLIPluginInstallOnExamplesServer runs the walkthroughs' install
// commands against a server started with --examples (as `make run` starts
// it), where the example Plugins exist already: they succeed unchanged.
func TestCLIPluginInstallOnExamplesServer(t *testing.T) {
	wasmModule(t, "widget-plugin")
	wasmModule(t, "replicagroup-plugin")
	s := testserver.Start(t, testserver.Options{Args: []string{"--examples", "--examples-dir", filepath.Join("..", "examples")}, LogLevel: "warn"})
	start := time.Now()
	for _, name := range []string{"widget", "replicagroup"} {
		testsupport.Eventually(t, 2*time.Minute-time.Since(start), "the example Plugin "+name, func() bool {
			return runCLI(t, s, nil, "", "get", "plugin", name).code == 0
		})
	}
	for _, args := range [][]string{
		{"plugin", "install", "widget", "--wasm", "../bin/wasm/widget-plugin.wasm", "--reconcile", "widgets", "--owns", "widgetprovisions"},
		{"plugin", "install", "replicagroup", "--wasm", "../bin/wasm/replicagroup-plugin.wasm", "--reconcile", "replicagroups", "--owns", "replicas", "--config", "maxReplicas=50"},
	} {
		out := ok(t, s, args...)
		if !regexp.MustCompile(`^plugin.setpoint.dev/\w+ unchanged \(module sha256:[0-9a-f]{64}\)\nplugin.setpoint.dev/\w+ loaded\n$`).MatchString(out) {
			t.Errorf("setpoint %s:\n%s", strings.Join(args, " "), out)
		}
	}
}
