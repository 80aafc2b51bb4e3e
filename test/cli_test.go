package test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// widgetCRD is the Widget kind of DESIGN.md, with printer columns (one of
// them wide-only) and a short name.
var widgetCRD = testsupport.CRD{
	Kind: "Widget", ShortNames: []string{"wd"}, Status: true,
	Columns: `
- {name: Display, type: string, jsonPath: .spec.name}
- {name: Size, type: string, jsonPath: .spec.size}
- {name: State, type: string, jsonPath: .status.state}
- {name: Color, type: string, jsonPath: .spec.color, priority: 1}
`,
	Schema: `
type: object
properties:
  spec:
    type: object
    required: [name, size]
    properties:
      name: {type: string}
      size: {type: string, enum: [small, medium, large]}
      color: {type: string}
  status:
    type: object
    properties:
      state: {type: string}
      conditions:
        type: array
        items:
          type: object
          properties:
            type: {type: string}
            status: {type: string}
            reason: {type: string}
            message: {type: string}
            lastTransitionTime: {type: string, format: date-time}
`,
}.String()

const widgets = `# two widgets
apiVersion: example.setpoint.dev/v1
kind: Widget
metadata:
  name: alpha
  labels: {env: dev}
spec:
  name: Alpha
  size: small
---
apiVersion: example.setpoint.dev/v1
kind: Widget
metadata:
  name: beta
  labels: {env: prod}
spec:
  name: Beta
  size: large
  color: blue
`

// cliResult is one run of the CLI.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs setpoint against s with extra environment and stdin.
func runCLI(t *testing.T, s *testserver.Server, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := s.Command(ctx, "setpoint", args...)
	cmd.Env = append(cmd.Env, env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run setpoint %v: %v", args, err)
	}
	return cliResult{stdout: out.String(), stderr: errb.String(), code: code}
}

// ok runs setpoint and fails the test unless it exits 0.
func ok(t *testing.T, s *testserver.Server, args ...string) string {
	t.Helper()
	r := runCLI(t, s, nil, "", args...)
	if r.code != 0 {
		t.Fatalf("setpoint %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails runs setpoint and checks its exit code and that stderr says each of
// wants.
func fails(t *testing.T, s *testserver.Server, env []string, stdin string, code int, wants []string, args ...string) {
	t.Helper()
	r := runCLI(t, s, env, stdin, args...)
	if r.code != code {
		t.Errorf("setpoint %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	for _, w := range wants {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("setpoint %s: stderr lacks %q:\n%s", strings.Join(args, " "), w, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "\x1b[") {
		t.Errorf("color codes on a pipe:\n%q", r.stderr)
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// columnsAligned checks that every line of a table starts its columns where
// the header does; a cell may be empty (kubectl prints a kind without short
// names so), but not start elsewhere.
func columnsAligned(t *testing.T, table string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	starts := regexp.MustCompile(`\S+`).FindAllStringIndex(lines[0], -1)
	for _, l := range lines[1:] {
		for i, st := range starts[1:] {
			end := len(l)
			if i+2 < len(starts) {
				end = min(starts[i+2][0], len(l))
			}
			if st[0] >= len(l) || l[st[0]-1] != ' ' || (l[st[0]] == ' ' && strings.TrimSpace(l[st[0]:end]) != "") {
				t.Errorf("row not aligned with the header at column %d:\n%s", st[0], table)
				return
			}
		}
	}
}

// onTerminal returns a command that runs the CLI with args (a shell word
// list) on a pseudo-terminal, which script(1) gives it, with TERM=xterm and
// without NO_COLOR, as a user's terminal has them.
func onTerminal(ctx context.Context, t *testing.T, s *testserver.Server, args string) *exec.Cmd {
	t.Helper()
	bin, err := testserver.Binary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := s.Command(ctx, "/usr/bin/script", "-qec", bin+" "+args, "/dev/null")
	var env []string
	for _, e := range cmd.Env {
		if !strings.HasPrefix(e, "NO_COLOR=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, "TERM=xterm")
	return cmd
}

func TestCLI(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	dir := writeFiles(t, map[string]string{
		"kinds/widget-crd.yaml": widgetCRD,
		"objects/widgets.yaml":  widgets,
	})
	widgetsFile := filepath.Join(dir, "objects/widgets.yaml")
	crdFile := filepath.Join(dir, "kinds/widget-crd.yaml")

	t.Run("apply puts the CRD first and creates", func(t *testing.T) {
		// The objects come first on the command line: apply must reorder.
		out := ok(t, s, "apply", "-f", widgetsFile, "-f", crdFile)
		for _, want := range []string{
			"customresourcedefinition.apiextensions.k8s.io/widgets.example.setpoint.dev created",
			"widget.example.setpoint.dev/alpha created",
			"widget.example.setpoint.dev/beta created",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("apply output lacks %q:\n%s", want, out)
			}
		}
		if strings.Index(out, "customresourcedefinition") > strings.Index(out, "widget.example") {
			t.Errorf("CRD not applied first:\n%s", out)
		}
	})

	rvs := func() string {
		return ok(t, s, "get", "widgets", "-o", "jsonpath={range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}")
	}

	t.Run("re-apply writes nothing", func(t *testing.T) {
		before := rvs()
		out := ok(t, s, "apply", "-R", "-f", dir)
		if strings.Count(out, "unchanged") != 3 || strings.Contains(out, "configured") || strings.Contains(out, "created") {
			t.Errorf("re-apply output:\n%s", out)
		}
		if after := rvs(); after != before {
			t.Errorf("resourceVersions moved on a no-op apply: %s -> %s", before, after)
		}
		// kubectl apply reads setpoint's last-applied configuration as its own.
		out, stderr, err := s.Kubectl("apply", "-f", widgetsFile)
		if err != nil || strings.Count(out, "unchanged") != 2 {
			t.Errorf("kubectl apply after setpoint apply: %v\n%s%s", err, out, stderr)
		}
		if after := rvs(); after != before {
			t.Errorf("resourceVersions moved on kubectl's no-op apply: %s -> %s", before, after)
		}
	})

	t.Run("apply a change from stdin", func(t *testing.T) {
		changed := strings.Replace(widgets, "size: small", "size: medium", 1)
		// beta drops its color: the three-way merge removes it.
		changed = strings.Replace(changed, "  color: blue\n", "", 1)
		r := runCLI(t, s, nil, changed, "apply", "-f", "-")
		if r.code != 0 {
			t.Fatalf("apply -f -: %d %s", r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, "widget.example.setpoint.dev/alpha configured") || !strings.Contains(r.stdout, "widget.example.setpoint.dev/beta configured") {
			t.Errorf("apply output:\n%s", r.stdout)
		}
		if got := ok(t, s, "get", "widget", "alpha", "-o", "jsonpath={.spec.size}"); got != "medium" {
			t.Errorf("alpha size %q, want medium", got)
		}
		if got := ok(t, s, "get", "widget", "beta", "-o", "jsonpath={.spec.color}"); got != "" {
			t.Errorf("beta color %q, want it removed", got)
		}
		// Back to the file's state for the tests below.
		ok(t, s, "apply", "-f", widgetsFile)
	})

	t.Run("get resolves plural, singular, kind, short name and group", func(t *testing.T) {
		want := ok(t, s, "get", "widgets", "-o", "name")
		if want != "widget.example.setpoint.dev/alpha\nwidget.example.setpoint.dev/beta\n" {
			t.Fatalf("get -o name:\n%s", want)
		}
		for _, name := range []string{"widget", "Widget", "wd", "widgets.example.setpoint.dev", "widgets.v1.example.setpoint.dev"} {
			if got := ok(t, s, "get", name, "-o", "name"); got != want {
				t.Errorf("get %s:\n%s\nwant:\n%s", name, got, want)
			}
		}
	})

	t.Run("get table has printer columns and AGE, aligned", func(t *testing.T) {
		out := ok(t, s, "get", "widgets")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 {
			t.Fatalf("table:\n%s", out)
		}
		if f := strings.Fields(lines[0]); strings.Join(f, " ") != "NAME DISPLAY SIZE STATE AGE" {
			t.Errorf("header %q", lines[0])
		}
		if f := strings.Fields(lines[1]); len(f) != 5 || f[0] != "alpha" || f[1] != "Alpha" || f[2] != "small" || f[3] != "<none>" {
			t.Errorf("row %q", lines[1])
		}
		if age := strings.Fields(lines[1])[4]; !regexp.MustCompile(`^\d+[smhd]`).MatchString(age) {
			t.Errorf("AGE %q", age)
		}
		columnsAligned(t, out)

		wide := ok(t, s, "get", "widgets", "-o", "wide")
		if !strings.Contains(strings.SplitN(wide, "\n", 2)[0], "COLOR") || !strings.Contains(wide, "blue") {
			t.Errorf("-o wide lacks the priority-1 column:\n%s", wide)
		}
		columnsAligned(t, wide)

		all := ok(t, s, "get", "wd", "-A")
		if !strings.HasPrefix(all, "NAMESPACE") || !strings.Contains(all, "default ") {
			t.Errorf("-A lacks the namespace column:\n%s", all)
		}
		columnsAligned(t, all)

		one := ok(t, s, "get", "widget/beta")
		if l := strings.Split(strings.TrimSpace(one), "\n"); len(l) != 2 || !strings.HasPrefix(l[1], "beta ") {
			t.Errorf("get widget/beta:\n%s", one)
		}
	})

	t.Run("get -o yaml, json, jsonpath and selectors", func(t *testing.T) {
		y := ok(t, s, "get", "widget", "alpha", "-o", "yaml")
		for _, want := range []string{"kind: Widget", "name: alpha", "size: small", "resourceVersion:"} {
			if !strings.Contains(y, want) {
				t.Errorf("-o yaml lacks %q:\n%s", want, y)
			}
		}
		var list struct {
			Kind  string
			Items []struct{ Metadata struct{ Name string } }
		}
		if err := json.Unmarshal([]byte(ok(t, s, "get", "widgets", "-o", "json")), &list); err != nil || list.Kind != "List" || len(list.Items) != 2 {
			t.Errorf("-o json: %v %+v", err, list)
		}
		if got := ok(t, s, "get", "widgets", "-l", "env in (prod,qa)", "-o", "jsonpath={.items[*].metadata.name}"); got != "beta" {
			t.Errorf("-l 'env in (prod,qa)': %q", got)
		}
		if got := ok(t, s, "get", "widgets", "-l", "env!=prod", "-o", "name"); got != "widget.example.setpoint.dev/alpha\n" {
			t.Errorf("-l env!=prod: %q", got)
		}
		r := runCLI(t, s, nil, "", "get", "widgets", "-l", "env=none")
		if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "No resources found in default namespace.") {
			t.Errorf("empty get: %+v", r)
		}
		several := ok(t, s, "get", "wd,ns")
		if !regexp.MustCompile(`(?s)^NAME\s+DISPLAY.*\nwidget.example.setpoint.dev/alpha\s.*\n\nNAME\s+STATUS\s+AGE\nnamespace/default\s`).MatchString(several) {
			t.Errorf("get wd,ns:\n%s", several)
		}
		if got := ok(t, s, "get", "widgets,namespaces", "-o", "name"); !strings.Contains(got, "widget.example.setpoint.dev/beta\nnamespace/default\n") {
			t.Errorf("get widgets,namespaces -o name:\n%s", got)
		}
		// The four namespaces a server starts with, and the two widgets.
		if got := ok(t, s, "get", "ns,wd", "-o", "jsonpath={.items[*].kind}"); got != "Namespace Namespace Namespace Namespace Widget Widget" {
			t.Errorf("get ns,wd -o jsonpath: %q", got)
		}
		if got := ok(t, s, "get", "ns", "default", "-o", "name"); got != "namespace/default\n" {
			t.Errorf("get ns default: %q", got)
		}
	})

	t.Run("dry run stores nothing; --show-labels", func(t *testing.T) {
		before := rvs()
		r := runCLI(t, s, nil, strings.Replace(widgets, "size: small", "size: large", 1), "apply", "--dry-run=server", "-f", "-")
		if r.code != 0 || !strings.Contains(r.stdout, "widget.example.setpoint.dev/alpha configured (server dry run)") {
			t.Errorf("apply --dry-run=server: %+v", r)
		}
		gamma := "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: dry}\nspec: {name: D, size: small}\n"
		if r := runCLI(t, s, nil, gamma, "apply", "--dry-run=server", "-f", "-"); r.code != 0 || !strings.Contains(r.stdout, "created (server dry run)") {
			t.Errorf("apply --dry-run=server of a new object: %+v", r)
		}
		fails(t, s, nil, strings.Replace(gamma, "small", "huge", 1), 6, []string{"spec.size"}, "apply", "--dry-run=server", "-f", "-")
		if out := ok(t, s, "delete", "widget", "beta", "--dry-run=server"); out != "widget.example.setpoint.dev/beta deleted (server dry run)\n" {
			t.Errorf("delete --dry-run=server: %q", out)
		}
		if after := rvs(); after != before {
			t.Errorf("dry runs changed objects: %s -> %s", before, after)
		}
		fails(t, s, nil, "", 4, []string{"not found"}, "get", "widget", "dry")
		out := ok(t, s, "get", "widgets", "--show-labels")
		if !regexp.MustCompile(`(?m)^alpha .*\senv=dev$`).MatchString(out) || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "LABELS") {
			t.Errorf("--show-labels:\n%s", out)
		}
	})

	t.Run("get -w sees ADDED, MODIFIED and DELETED", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := s.Command(ctx, "setpoint", "get", "widgets", "-w", "--watch-only", "--output-watch-events", "-o", "name")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		lines := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// The watch starts from now; give it a moment to be established by
		// writing until the first event shows.
		gamma := "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: gamma}\nspec: {name: G, size: small}\n"
		want := []string{
			"ADDED widget.example.setpoint.dev/gamma",
			"MODIFIED widget.example.setpoint.dev/gamma",
			"DELETED widget.example.setpoint.dev/gamma",
		}
		time.Sleep(500 * time.Millisecond)
		if r := runCLI(t, s, nil, gamma, "apply", "-f", "-"); r.code != 0 {
			t.Fatalf("apply gamma: %+v", r)
		}
		expect := func(w string) {
			t.Helper()
			select {
			case l, open := <-lines:
				if !open {
					t.Fatalf("watch ended before %q; stderr: %s", w, stderr.String())
				}
				if l != w {
					t.Fatalf("watch printed %q, want %q", l, w)
				}
			case <-ctx.Done():
				t.Fatalf("no %q within a minute", w)
			}
		}
		expect(want[0])
		if r := runCLI(t, s, nil, strings.Replace(gamma, "small", "large", 1), "apply", "-f", "-"); r.code != 0 {
			t.Fatalf("apply gamma: %+v", r)
		}
		expect(want[1])
		ok(t, s, "delete", "widget", "gamma")
		expect(want[2])
	})

	t.Run("describe", func(t *testing.T) {
		uid := ok(t, s, "get", "widget", "alpha", "-o", "jsonpath={.metadata.uid}")
		child := "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: alpha-child\n  ownerReferences:\n  - {apiVersion: example.setpoint.dev/v1, kind: Widget, name: alpha, uid: " + uid + ", controller: true}\nspec: {name: C, size: small}\n"
		if r := runCLI(t, s, nil, child, "apply", "-f", "-"); r.code != 0 {
			t.Fatalf("apply child: %+v", r)
		}
		out := ok(t, s, "describe", "widget", "alpha")
		for _, want := range []string{"Name:", "alpha", "Namespace:", "default", "Labels:", "env=dev", "Spec:", "size: small",
			"Conditions:", "Children:", "widget.example.setpoint.dev/alpha-child", "Events:"} {
			if !strings.Contains(out, want) {
				t.Errorf("describe lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "last-applied-configuration") {
			t.Errorf("describe shows the last-applied annotation:\n%s", out)
		}
		childOut := ok(t, s, "describe", "wd", "alpha-child")
		if !strings.Contains(childOut, "Widget/alpha (controller)") {
			t.Errorf("describe of the child lacks its owner:\n%s", childOut)
		}
		ok(t, s, "delete", "widget", "alpha-child", "--wait")
	})

	t.Run("describe shows conditions and events", func(t *testing.T) {
		status := `{"status":{"state":"Ready","conditions":[{"type":"Ready","status":"True","reason":"Provisioned","message":"all good","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
		if out, stderr, err := s.Kubectl("patch", "widget", "alpha", "--subresource=status", "--type=merge", "-p", status); err != nil {
			t.Fatalf("kubectl patch status: %v\n%s%s", err, out, stderr)
		}
		uid := ok(t, s, "get", "widget", "alpha", "-o", "jsonpath={.metadata.uid}")
		event := "apiVersion: v1\nkind: Event\nmetadata: {name: alpha.provisioned}\n" +
			"involvedObject: {apiVersion: example.setpoint.dev/v1, kind: Widget, name: alpha, namespace: default, uid: " + uid + "}\n" +
			"reason: Provisioned\nmessage: widget is ready\ntype: Normal\nsource: {component: widget-plugin}\n"
		if r := runCLI(t, s, nil, event, "apply", "-f", "-"); r.code != 0 {
			t.Fatalf("apply event: %+v", r)
		}
		out := ok(t, s, "describe", "widget", "alpha")
		for _, want := range []string{"Status:", "state: Ready", "Conditions:", "TYPE", "Ready", "True", "Provisioned", "all good",
			"Events:", "widget is ready", "widget-plugin"} {
			if !strings.Contains(out, want) {
				t.Errorf("describe lacks %q:\n%s", want, out)
			}
		}
		if !regexp.MustCompile(`(?m)^alpha\s+Alpha\s+small\s+Ready\s+\d`).MatchString(ok(t, s, "get", "widgets")) {
			t.Errorf("STATE column does not show the status:\n%s", ok(t, s, "get", "widgets"))
		}
	})

	t.Run("get -w prints table rows as objects change", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := s.Command(ctx, "setpoint", "get", "widgets", "-w")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(stdout)
		next := func() string {
			t.Helper()
			if !sc.Scan() {
				t.Fatalf("watch output ended: %v", sc.Err())
			}
			return sc.Text()
		}
		if h := next(); !strings.HasPrefix(h, "NAME") || !strings.Contains(h, "AGE") {
			t.Fatalf("header %q", h)
		}
		next()
		next() // alpha and beta
		if r := runCLI(t, s, nil, strings.Replace(widgets, "size: large", "size: medium", 1), "apply", "-f", "-"); r.code != 0 {
			t.Fatalf("apply: %+v", r)
		}
		if row := next(); !regexp.MustCompile(`^beta\s+Beta\s+medium\s`).MatchString(row) {
			t.Errorf("watch row after the change %q", row)
		}
		ok(t, s, "apply", "-f", widgetsFile)
	})

	t.Run("delete --wait waits for finalizers", func(t *testing.T) {
		held := "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: held, finalizers: [example.setpoint.dev/hold]}\nspec: {name: H, size: small}\n"
		if r := runCLI(t, s, nil, held, "apply", "-f", "-"); r.code != 0 {
			t.Fatalf("apply: %+v", r)
		}
		r := runCLI(t, s, nil, "", "delete", "widget", "held", "--wait", "--timeout", "1s")
		if r.code != 1 || !strings.Contains(r.stdout, "widget.example.setpoint.dev/held deleted") ||
			!strings.Contains(r.stderr, "still exists") || !strings.Contains(r.stderr, "example.setpoint.dev/hold") {
			t.Errorf("delete --wait with a finalizer: %+v", r)
		}
		if ts := ok(t, s, "get", "widget", "held", "-o", "jsonpath={.metadata.deletionTimestamp}"); ts == "" {
			t.Error("no deletionTimestamp on the held widget")
		}
		if out, stderr, err := s.Kubectl("patch", "widget", "held", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`); err != nil {
			t.Fatalf("remove finalizer: %v\n%s%s", err, out, stderr)
		}
		fails(t, s, nil, "", 4, []string{"not found"}, "get", "widget", "held")
	})

	t.Run("color only on a terminal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := onTerminal(ctx, t, s, "get widget nope")
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "\x1b[31merror:\x1b[0m") {
			t.Errorf("no color on a terminal: %q", out)
		}
		r := runCLI(t, s, nil, "", "get", "widget", "nope")
		if strings.Contains(r.stderr, "\x1b[") {
			t.Errorf("color on a pipe: %q", r.stderr)
		}
	})

	t.Run("kinds and version", func(t *testing.T) {
		out := ok(t, s, "kinds")
		var row string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "widgets ") {
				row = l
			}
		}
		if f := strings.Fields(row); len(f) != 5 || f[1] != "wd" || f[2] != "example.setpoint.dev/v1" || f[3] != "true" || f[4] != "Widget" {
			t.Errorf("kinds row for widgets %q in:\n%s", row, out)
		}
		if !strings.Contains(out, "namespaces ") {
			t.Errorf("kinds lacks namespaces:\n%s", out)
		}
		columnsAligned(t, out)
		v := ok(t, s, "version")
		// Each line may end with the VCS stamp, "(commit C, clean, T)", when
		// the binary carries one (TestCLIVersion checks it).
		if !regexp.MustCompile(`(?m)^Client Version: \S+( \(commit [^)]*\))?\nServer Version: v\S+( \(commit [^)]*\))?$`).MatchString(v) {
			t.Errorf("version:\n%s", v)
		}
	})

	t.Run("completion", func(t *testing.T) {
		for _, sh := range []string{"bash", "zsh", "fish"} {
			if out := ok(t, s, "completion", sh); !strings.Contains(out, "setpoint") || len(out) < 500 {
				t.Errorf("completion %s: %d bytes", sh, len(out))
			}
		}
		fails(t, s, nil, "", 2, []string{"tcsh"}, "completion", "tcsh")
		// Resource arguments complete from discovery.
		if out := ok(t, s, "__complete", "get", ""); !strings.Contains(out, "namespaces\n") || !strings.Contains(out, "ns\n") {
			t.Errorf("completion of get's resource:\n%s", out)
		}
	})

	t.Run("errors a person can act on", func(t *testing.T) {
		bad := writeFiles(t, map[string]string{
			"syntax.yaml":  "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ok\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: [unclosed\n",
			"invalid.yaml": "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: bad}\nspec:\n  size: huge\n",
			"nokind.yaml":  "apiVersion: v1\nmetadata: {name: x}\n",
			"unknown.yaml": "apiVersion: nowhere.example/v1\nkind: Gizmo\nmetadata: {name: x}\n",
		})
		fails(t, s, nil, "", 2, []string{"missing.yaml", "no such file"}, "apply", "-f", filepath.Join(bad, "missing.yaml"))
		fails(t, s, nil, "", 6, []string{filepath.Join(bad, "syntax.yaml") + ":9:", "YAML"}, "apply", "-f", filepath.Join(bad, "syntax.yaml"))
		fails(t, s, nil, "", 6, []string{"nokind.yaml:1", "no kind"}, "apply", "-f", filepath.Join(bad, "nokind.yaml"))
		fails(t, s, nil, "", 6, []string{"invalid.yaml:1", "spec.size", "spec.name"}, "apply", "-f", filepath.Join(bad, "invalid.yaml"))
		fails(t, s, nil, "", 4, []string{"Gizmo", "CustomResourceDefinition"}, "apply", "-f", filepath.Join(bad, "unknown.yaml"))
		fails(t, s, nil, "", 4, []string{"gizmos", "setpoint kinds"}, "get", "gizmos")
		fails(t, s, nil, "", 4, []string{"nope", "not found"}, "get", "widget", "nope")
		fails(t, s, nil, "", 4, []string{"nope", "not found"}, "delete", "widget", "nope")
		fails(t, s, nil, "", 2, []string{"unknown output format"}, "get", "widgets", "-o", "xml")
		fails(t, s, nil, "", 2, []string{"unknown flag"}, "get", "widgets", "--bogus")
		fails(t, s, nil, "", 2, []string{"usage"}, "get")

		// A manifest that carries a resourceVersion someone has since moved on.
		stale := ok(t, s, "get", "widget", "beta", "-o", "yaml")
		if r := runCLI(t, s, nil, strings.Replace(widgets, "name: Beta", "name: Beta2", 1), "apply", "-f", "-"); r.code != 0 {
			t.Fatalf("apply: %+v", r)
		}
		fails(t, s, nil, strings.Replace(stale, "size: large", "size: medium", 1), 5, []string{"changed since you read it"}, "apply", "-f", "-")
		ok(t, s, "apply", "-f", widgetsFile)

		for _, args := range [][]string{
			{"get", "widgets"}, {"describe", "widget", "alpha"}, {"delete", "widget", "alpha", "beta"}, {"kinds"}, {"version"},
			{"apply", "-f", widgetsFile}, {"plugin", "list"},
		} {
			fails(t, s, []string{"SETPOINT_SERVER=https://127.0.0.1:1"}, "", 3, []string{"https://127.0.0.1:1", "cannot reach"}, args...)
		}
		fails(t, s, []string{"SETPOINT_TOKEN=wrong"}, "", 7, []string{"401"}, "get", "widgets")
	})

	t.Run("connection: flags, then environment, then kubeconfig", func(t *testing.T) {
		ca := filepath.Join(s.DataDir, "pki", "ca.crt")
		noKubeconfig := []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "none")}
		// Flags alone.
		r := runCLI(t, s, noKubeconfig, "", "get", "widgets", "-o", "name", "--server", s.URL, "--token", s.Token, "--certificate-authority", ca)
		if r.code != 0 || !strings.Contains(r.stdout, "alpha") {
			t.Errorf("flags only: %+v", r)
		}
		// Environment alone.
		r = runCLI(t, s, append(noKubeconfig, "SETPOINT_SERVER="+s.URL, "SETPOINT_TOKEN="+s.Token), "", "get", "widgets", "-o", "name", "--certificate-authority", ca)
		if r.code != 0 || !strings.Contains(r.stdout, "alpha") {
			t.Errorf("environment only: %+v", r)
		}
		// A flag beats the environment, which beats the kubeconfig.
		r = runCLI(t, s, []string{"SETPOINT_TOKEN=wrong"}, "", "get", "widgets", "-o", "name", "--token", s.Token)
		if r.code != 0 {
			t.Errorf("--token over SETPOINT_TOKEN: %+v", r)
		}
		// --kubeconfig names the file.
		r = runCLI(t, s, noKubeconfig, "", "get", "widgets", "-o", "name", "--kubeconfig", s.Kubeconfig)
		if r.code != 0 {
			t.Errorf("--kubeconfig: %+v", r)
		}
		fails(t, s, noKubeconfig, "", 2, []string{"no server configured"}, "get", "widgets")
	})

	t.Run("delete by selector, from a file, and the CRD", func(t *testing.T) {
		out := ok(t, s, "delete", "widgets", "-l", "env=dev")
		if out != "widget.example.setpoint.dev/alpha deleted\n" {
			t.Errorf("delete -l: %q", out)
		}
		out = ok(t, s, "delete", "-f", widgetsFile, "--ignore-not-found", "--wait")
		if out != "widget.example.setpoint.dev/beta deleted\n" {
			t.Errorf("delete -f: %q", out)
		}
		if got := ok(t, s, "get", "widgets", "-o", "name"); got != "" {
			t.Errorf("widgets left: %q", got)
		}
		ok(t, s, "delete", "-f", crdFile, "--wait")
		fails(t, s, nil, "", 4, []string{"widgets"}, "get", "widgets")
	})
}
