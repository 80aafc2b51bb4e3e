package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

var buildWasmOnce sync.Once

// wasmModule returns bin/wasm/NAME.wasm, building the guests with
// .ci/build-wasm (what `make plugins` runs) when it is missing.
func wasmModule(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "bin", "wasm", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		buildWasmOnce.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "./.ci/build-wasm")
			cmd.Dir = ".."
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf(".ci/build-wasm: %v\n%s", err, out)
			}
		})
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("module %s: %v", name, err)
	}
	return path
}

func TestCLIPlugins(t *testing.T) {
	labels, defaults := wasmModule(t, "requiredlabels"), wasmModule(t, "defaults")
	s := testserver.Start(t, testserver.Options{})
	ok(t, s, "apply", "-f", filepath.Join(writeFiles(t, map[string]string{"crd.yaml": widgetCRD}), "crd.yaml"))

	t.Run("install an admission plugin and meet its denial", func(t *testing.T) {
		out := ok(t, s, "plugin", "install", "labels", "--wasm", labels, "--admit", "wd", "--operations", "CREATE,UPDATE", "--config", "labels=team",
			"--permissions", "read=widgets,write=events")
		if !regexp.MustCompile(`plugin.setpoint.dev/labels created \(module sha256:[0-9a-f]{64}\)\nplugin.setpoint.dev/labels loaded\n`).MatchString(out) {
			t.Errorf("install output:\n%s", out)
		}
		perms := ok(t, s, "get", "plugin", "labels", "-o", "jsonpath={.spec.permissions.read[*]} / {.spec.permissions.write[*]}")
		if !regexp.MustCompile(`^widgets\S* / events\S*$`).MatchString(strings.TrimSpace(perms)) {
			t.Errorf("--permissions read=widgets,write=events gave spec.permissions %q", perms)
		}
		bad := "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: nolabel}\nspec: {name: Plain, size: small}\n"
		fails(t, s, nil, bad, 6, []string{"<stdin>:1", `"labels"`, "missing required labels: team"}, "apply", "-f", "-")
		good := strings.Replace(bad, "{name: nolabel}", "{name: labelled, labels: {team: a}}", 1)
		if r := runCLI(t, s, nil, good, "apply", "-f", "-"); r.code != 0 {
			t.Errorf("apply with the label: %+v", r)
		}
		fails(t, s, nil, "", 5, []string{"exists already", "plugin upgrade"}, "plugin", "install", "labels", "--wasm", labels, "--admit", "widgets")
	})

	t.Run("list and describe", func(t *testing.T) {
		out := ok(t, s, "plugin", "list")
		if !regexp.MustCompile(`(?m)^NAME\s+DIGEST\s+PHASE\s+READY\s+AGE\n^labels\s+sha256:[0-9a-f]{64}\s+Loaded\s+True\s+\d`).MatchString(out) {
			t.Errorf("plugin list:\n%s", out)
		}
		out = ok(t, s, "plugin", "describe", "labels")
		for _, want := range []string{"Module:", "Phase:          Loaded", "Calls:", "Errors:", "Last error:",
			"admits (validating, failure policy Fail) CREATE, UPDATE of widgets.example.setpoint.dev", "labels=team", "Limits:", "Conditions:"} {
			if !strings.Contains(out, want) {
				t.Errorf("plugin describe lacks %q:\n%s", want, out)
			}
		}
		fails(t, s, nil, "", 4, []string{"no plugin", "plugin list"}, "plugin", "describe", "nope")
	})

	t.Run("upgrade swaps the module", func(t *testing.T) {
		before := ok(t, s, "get", "plugin", "labels", "-o", "jsonpath={.spec.module.digest}")
		out := ok(t, s, "plugin", "upgrade", "labels", "--wasm", defaults)
		if !strings.Contains(out, "upgraded: module "+before+" -> sha256:") || !strings.HasSuffix(out, "loaded\n") {
			t.Errorf("upgrade output:\n%s", out)
		}
		after := ok(t, s, "get", "plugin", "labels", "-o", "jsonpath={.status.loadedDigest}")
		if after == before || !strings.HasPrefix(after, "sha256:") {
			t.Errorf("loaded digest %s after the upgrade from %s", after, before)
		}
		if out := ok(t, s, "plugin", "upgrade", "labels", "--wasm", defaults); !strings.Contains(out, "unchanged") {
			t.Errorf("upgrade to the same module:\n%s", out)
		}
		fails(t, s, nil, "", 4, []string{"no plugin", "plugin install"}, "plugin", "upgrade", "nope", "--wasm", defaults)
	})

	t.Run("usage errors", func(t *testing.T) {
		fails(t, s, nil, "", 2, []string{"binding"}, "plugin", "install", "x", "--wasm", labels)
		fails(t, s, nil, "", 2, []string{"nowhere.wasm"}, "plugin", "install", "x", "--wasm", "nowhere.wasm", "--admit", "widgets")
		notWasm := filepath.Join(writeFiles(t, map[string]string{"x.wasm": "hello"}), "x.wasm")
		fails(t, s, nil, "", 6, []string{"not a WebAssembly module"}, "plugin", "install", "x", "--wasm", notWasm, "--admit", "widgets")
		fails(t, s, nil, "", 4, []string{"gizmos"}, "plugin", "install", "x", "--wasm", labels, "--admit", "gizmos")
	})

	t.Run("the upload is checked with the plugin's limits", func(t *testing.T) {
		// The guest starts with more than 16 pages of memory (38 today): a
		// Plugin capped at 16 can never run it, so the upload refuses it and
		// no Plugin is created.
		widget := wasmModule(t, "widget")
		fails(t, s, nil, "", 6, []string{"module refused", "memory limit", "over limit of 16 pages"},
			"plugin", "install", "small", "--wasm", widget, "--admit", "widgets", "--memory-pages", "16")
		fails(t, s, nil, "", 4, []string{"small"}, "get", "plugin", "small")
		out := ok(t, s, "plugin", "install", "small", "--wasm", widget, "--admit", "widgets", "--memory-pages", "64")
		if !strings.HasSuffix(out, "loaded\n") {
			t.Errorf("install with room for the module's memory:\n%s", out)
		}
		ok(t, s, "delete", "plugin", "small")
	})

	t.Run("the upload shows progress on a terminal only", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := onTerminal(ctx, t, s, "plugin install tty --wasm "+labels+" --admit widgets --config labels=team")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install on a terminal: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "requiredlabels.wasm  [==============================] 100%") {
			t.Errorf("no progress bar on a terminal:\n%q", out)
		}
		// After the bar, what the server does before it answers.
		for _, re := range []string{`\rchecking and compiling module sha256:[0-9a-f]{12} on the server \.\.\. done \(\d+\.\ds\)\r?\n`,
			`\rwaiting for the server to load plugin tty \.\.\. done \(\d+\.\ds\)\r?\n`} {
			if !regexp.MustCompile(re).Match(out) {
				t.Errorf("on a terminal, no line matching %s:\n%q", re, out)
			}
		}
		r := runCLI(t, s, nil, "", "plugin", "upgrade", "tty", "--wasm", defaults)
		if r.code != 0 || strings.Contains(r.stderr, "%") || strings.Contains(r.stderr, "\r") || strings.Contains(r.stderr, "...") {
			t.Errorf("progress on a pipe: %+v", r)
		}
	})
}
