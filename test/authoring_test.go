package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestAuthoringGuide runs docs/PLUGINS.md's "Your first plugin" as a new
// author would, with only Go and the setpoint binary: from an empty
// directory, plugin init, make (the .wasm), make test (unit tests and the
// module under the real host), plugin test, make crd; then on a real
// server: apply the CRD, install, see the object Ready, its log line and
// the admission refuse, upgrade to a changed module and see its status.
//
// Offline is enforced, not assumed: GOPROXY=off, GOFLAGS=-mod=mod, an empty
// GOPATH and module cache of the test's own, GOWORK=off and
// GOTOOLCHAIN=local, so any module the project needed from outside would
// fail the build. The build cache (compiled packages, not module sources)
// is shared to keep the test fast.
func TestAuthoringGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin project twice")
	}
	bin, err := testserver.Binary()
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := exec.Command(goBin, "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	gopath := filepath.Join(work, "gopath")
	env := []string{
		"PATH=" + filepath.Dir(goBin) + ":/usr/bin:/bin",
		"HOME=" + filepath.Join(work, "home"),
		"GOPATH=" + gopath,
		"GOMODCACHE=" + filepath.Join(gopath, "pkg", "mod"),
		"GOCACHE=" + strings.TrimSpace(string(cache)),
		"GOPROXY=off",
		"GOFLAGS=-mod=mod",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GONOSUMDB=", "GOSUMDB=off",
		"SETPOINT=" + bin,
		"NO_COLOR=1",
	}
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// Write, build and test, offline.
	run(work, bin, "plugin", "init", "gadget", "--group", "example.setpoint.dev", "--kind", "Gadget", "--admission")
	proj := filepath.Join(work, "gadget")
	run(proj, "make")
	wasm := filepath.Join(proj, "bin", "gadget.wasm")
	if st, err := os.Stat(wasm); err != nil || st.Size() == 0 {
		t.Fatalf("make built no module: %v", err)
	}
	if out := run(proj, "make", "test"); strings.Count(out, "ok  \tgadget") < 2 {
		t.Errorf("make test ran fewer than two test runs of the plugin:\n%s", out)
	}
	report := run(proj, bin, "plugin", "test", "bin/gadget.wasm", "--crd", "crd.yaml", "--object", "example.yaml", "--admission", "create")
	for _, want := range []string{"allowed: true", "greeting: hello (x1)", "reason: Reconciled"} {
		if !strings.Contains(report, want) {
			t.Errorf("plugin test report lacks %q:\n%s", want, report)
		}
	}
	crd, _ := os.ReadFile(filepath.Join(proj, "crd.yaml"))
	run(proj, "make", "crd")
	if regenerated, _ := os.ReadFile(filepath.Join(proj, "crd.yaml")); string(regenerated) != string(crd) {
		t.Errorf("make crd changed the CRD plugin init wrote:\n%s\nwas\n%s", regenerated, crd)
	}
	if _, err := os.Stat(filepath.Join(proj, "go.sum")); err == nil {
		t.Errorf("the build wrote a go.sum: it resolved a module from outside the project")
	}

	// Install on a real server.
	s := testserver.Start(t, testserver.Options{})
	ok(t, s, "apply", "-f", filepath.Join(proj, "crd.yaml"))
	ok(t, s, "plugin", "install", "gadget", "--wasm", wasm, "--reconcile", "gadgets", "--admit", "gadgets", "--permissions", "write=events")
	ok(t, s, "apply", "-f", filepath.Join(proj, "example.yaml"))
	get := func(path string) func() string {
		return func() string {
			out, _, _ := s.Setpoint("get", "gadget", "example", "-o", "jsonpath="+path)
			return strings.TrimSpace(out)
		}
	}
	eventually(t, "example's Ready condition", 30*time.Second, "True", get(`{.status.conditions[?(@.type=="Ready")].status}`))
	eventually(t, "example's greeting", 10*time.Second, "hello (x1)", get("{.status.greeting}"))
	// The plugin's logs: the guide's `setpoint plugin logs gadget` shows
	// the line main.go logs, for the object it reconciled.
	eventually(t, "the plugin's log", 30*time.Second, "true", func() string {
		r := runCLI(t, s, nil, "", "plugin", "logs", "gadget", "--object", "Gadget/example")
		return strconv.FormatBool(r.code == 0 && strings.Contains(r.stdout, "INFO Gadget default/example greeting changed"))
	})
	shout := "apiVersion: example.setpoint.dev/v1\nkind: Gadget\nmetadata: {name: loud}\nspec: {message: HELLO}\n"
	fails(t, s, nil, shout, 6, []string{"no shouting"}, "apply", "-f", "-")

	// Upgrade to a changed module.
	mainGo := filepath.Join(proj, "main.go")
	src, err := os.ReadFile(mainGo)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(src), `"%s (x%d)"`, `"%s (times %d)"`, 1)
	if changed == string(src) {
		t.Fatal("main.go no longer formats the greeting as the guide says")
	}
	if err := os.WriteFile(mainGo, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	run(proj, "make")
	ok(t, s, "plugin", "upgrade", "gadget", "--wasm", wasm)
	// The new module reconciles the existing object, and later changes.
	eventually(t, "example's greeting after the upgrade", 30*time.Second, "hello (times 1)", get("{.status.greeting}"))
	if r := runCLI(t, s, nil, "apiVersion: example.setpoint.dev/v1\nkind: Gadget\nmetadata: {name: example}\nspec: {message: hello, replicas: 2}\n", "apply", "-f", "-"); r.code != 0 {
		t.Fatalf("apply: %+v", r)
	}
	eventually(t, "example's greeting after a change", 30*time.Second, "hello (times 2)", get("{.status.greeting}"))
}
