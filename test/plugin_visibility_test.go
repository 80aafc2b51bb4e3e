package test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// strictGadgetCRD is a kind whose status the server checks: state may only be
// "ready", so the faulty guest's {"state":"ok"} violates it.
var strictGadgetCRD = testsupport.CRD{
	Kind: "Gadget", Status: true,
	Schema: `
type: object
properties:
  spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
  status:
    type: object
    properties:
      state: {type: string, enum: [ready]}
      observedGeneration: {type: integer}
      conditions:
        type: array
        items: {type: object, x-kubernetes-preserve-unknown-fields: true}
`,
}.String()

// looseGizmoCRD is a kind with no checks, reconciled by the noisy plugins.
var looseGizmoCRD = testsupport.CRD{
	Kind: "Gizmo", Status: true,
	Schema: `
type: object
x-kubernetes-preserve-unknown-fields: true
`,
}.String()

// serverMetric sums the samples of a metric whose labels contain each part.
func serverMetric(t *testing.T, s *testserver.Server, name string, parts ...string) float64 {
	t.Helper()
	code, body, err := s.Do("GET", "/metrics", s.Token, nil)
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
	var sum float64
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(m[1], p)
		}
		if all {
			v, _ := strconv.ParseFloat(m[2], 64)
			sum += v
		}
	}
	return sum
}

// TestPluginFailuresVisible runs, on the real server, the failures a
// plugin's author must see without the server's log: a status the server
// refuses, a plugin that logs in a loop, and one that writes faster than
// its limit.
func TestPluginFailuresVisible(t *testing.T) {
	faulty, writer := wasmModule(t, "faulty"), wasmModule(t, "writer")
	widgetPlugin := wasmModule(t, "widget-plugin")
	s := testserver.Start(t, testserver.Options{Args: []string{"--plugin-status-interval", "300ms",
		"--plugin-log-rate", "20", "--plugin-log-burst", "50", "--plugin-write-rate", "4", "--plugin-write-burst", "10"}})
	widgetCRDs, err := os.ReadFile(filepath.Join("..", "examples", "widget", "crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	provisionCRD, err := os.ReadFile(filepath.Join("..", "examples", "widget", "provision-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{strictGadgetCRD, looseGizmoCRD, noteCRD, string(widgetCRDs), string(provisionCRD)} {
		if out, errOut, err := s.KubectlInput(m, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply CRD: %v\n%s%s", err, out, errOut)
		}
	}
	kubectl := func(args ...string) string {
		out, _, _ := s.Kubectl(args...)
		return out
	}
	apply := func(m string) {
		t.Helper()
		if out, errOut, err := s.KubectlInput(m, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s%s", err, out, errOut)
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testsupport.Eventually(t, time.Minute, what, cond)
	}

	t.Run("a status the server refuses", func(t *testing.T) {
		ok(t, s, "plugin", "install", "strict", "--wasm", faulty, "--reconcile", "gadgets", "--config", "mode=ok")
		apply("apiVersion: example.setpoint.dev/v1\nkind: Gadget\nmetadata: {name: g1, namespace: default}\nspec: {}\n")
		var cond string
		waitFor("Ready=False on g1", func() bool {
			cond = kubectl("get", "gadget", "g1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].message}`)
			return strings.HasPrefix(cond, "False|")
		})
		if !strings.Contains(cond, "refused the plugin's status") || !strings.Contains(cond, "status.state") || !strings.Contains(cond, `"ready"`) {
			t.Errorf("Ready = %q, want the server's complaint about status.state", cond)
		}
		waitFor("a Warning event on g1", func() bool {
			ev := kubectl("get", "events", "--field-selector", "involvedObject.name=g1", "-o", `jsonpath={range .items[*]}{.type}:{.message}{"\n"}{end}`)
			return strings.Contains(ev, "Warning:the server refused the plugin's status")
		})
		var errs string
		waitFor("the Plugin's error count", func() bool {
			errs = kubectl("get", "plugin", "strict", "-o", "jsonpath={.status.errors}|{.status.lastError}")
			return strings.HasPrefix(errs, "1|") || strings.HasPrefix(errs, "2|")
		})
		if !strings.Contains(errs, "status refused") || !strings.Contains(errs, "status.state") {
			t.Errorf("Plugin status errors|lastError = %q, want the refusal", errs)
		}
	})

	t.Run("a plugin that logs in a loop", func(t *testing.T) {
		ok(t, s, "plugin", "install", "loud", "--wasm", faulty, "--reconcile", "gizmos", "--config", "mode=flood")
		start := time.Now()
		apply("apiVersion: example.setpoint.dev/v1\nkind: Gizmo\nmetadata: {name: z1, namespace: default}\nspec: {}\n")
		var dropped float64
		waitFor("dropped log lines counted", func() bool {
			dropped = serverMetric(t, s, "setpoint_plugin_log_lines_dropped_total", `plugin="loud"`)
			return dropped > 1000
		})
		// The server's own log gets only the kept lines: at most the burst
		// and the rate since the flood began.
		elapsed := time.Since(start)
		var inServerLog, bytes int
		for _, l := range strings.Split(s.Logs(), "\n") {
			if strings.Contains(l, `msg="plugin log"`) && strings.Contains(l, "plugin=loud") {
				inServerLog++
				bytes += len(l) + 1
			}
		}
		t.Logf("flood: %v lines dropped in %s; %d lines (%d bytes) reached the server's log", dropped, elapsed.Round(time.Millisecond), inServerLog, bytes)
		if limit := 50 + int(20*elapsed.Seconds()) + 20; inServerLog > limit {
			t.Errorf("%d plugin lines in the server's log after %s, want at most %d (burst 50, 20 lines/s)", inServerLog, elapsed, limit)
		}
		out := ok(t, s, "plugin", "logs", "loud")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) > 1000 || !strings.Contains(out, " INFO Gizmo default/z1 flood") || !regexp.MustCompile(`WARN - \d+ lines dropped`).MatchString(out) {
			t.Errorf("plugin logs loud: %d lines, want at most 1000 with the flood and a drop note; first lines:\n%s", len(lines), strings.Join(lines[:min(5, len(lines))], "\n"))
		}
		if got := ok(t, s, "plugin", "logs", "loud", "--tail", "3"); strings.Count(got, "\n") != 3 {
			t.Errorf("--tail 3 printed:\n%s", got)
		}
		if got := ok(t, s, "plugin", "logs", "loud", "--object", "Gizmo/nope"); got != "" {
			t.Errorf("--object Gizmo/nope printed:\n%s", got)
		}
		if got := ok(t, s, "plugin", "logs", "loud", "--object", "Gizmo/default/z1", "--tail", "1"); !strings.Contains(got, "Gizmo default/z1") {
			t.Errorf("--object Gizmo/default/z1 printed:\n%s", got)
		}
		fails(t, s, nil, "", 4, []string{`no plugin "nobody"`}, "plugin", "logs", "nobody")

		// -f prints the lines that come after it started, here those about z1.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := s.Command(ctx, "setpoint", "plugin", "logs", "loud", "-f", "--tail", "0", "--object", "Gizmo/z1")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A change reconciles the gizmo again, and the flood goes on.
		if out, errOut, err := s.Kubectl("label", "gizmo", "z1", "poke=1", "--overwrite"); err != nil {
			t.Fatalf("label gizmo: %v %s%s", err, out, errOut)
		}
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || !strings.Contains(sc.Text(), "Gizmo default/z1") {
			t.Errorf("plugin logs -f: first line %q, err %v", sc.Text(), sc.Err())
		}
		cancel()
		_ = cmd.Wait()

		// The log goes with the Plugin.
		if out, errOut, err := s.Kubectl("delete", "plugin", "loud", "--timeout=60s"); err != nil {
			t.Fatalf("delete plugin loud: %v %s%s", err, out, errOut)
		}
		if code, body, err := s.Do("GET", "/apis/setpoint.dev/v1alpha1/plugins/loud/log", s.Token, nil); err != nil || code != 404 {
			t.Errorf("log of a deleted plugin: %d %s %v, want 404", code, body, err)
		}
	})

	t.Run("a plugin that writes faster than its limit", func(t *testing.T) {
		apply("apiVersion: example.setpoint.dev/v1\nkind: Note\nmetadata: {name: target, namespace: default}\nspec: {size: small}\n")
		// The gadgets' plugin gives way to one that patches a Note 30
		// times per reconcile.
		if out, errOut, err := s.Kubectl("delete", "plugin", "strict", "--timeout=60s"); err != nil {
			t.Fatalf("delete plugin strict: %v %s%s", err, out, errOut)
		}
		ok(t, s, "plugin", "install", "busy", "--wasm", writer, "--reconcile", "gadgets", "--permissions", "write=notes")
		if out, errOut, err := s.Kubectl("patch", "plugin", "busy", "--type", "merge", "-p", `{"spec":{"config":{"op":"patch","repeat":"30",`+
			`"apiVersion":"example.setpoint.dev/v1","kind":"Note","namespace":"default","name":"target","patch":"{\"metadata\":{\"labels\":{\"x\":\"y\"}}}"}}}`); err != nil {
			t.Fatalf("patch plugin busy: %v %s%s", err, out, errOut)
		}
		var cond string
		waitFor("Ready=False naming the write limit", func() bool {
			cond = kubectl("get", "gadget", "g1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
			return strings.Contains(cond, "writes faster than its limit of 4 writes/s (burst 10)")
		})
		if !strings.Contains(cond, "TooManyRequests") && !strings.Contains(cond, "429") {
			t.Errorf("Ready message %q, want the 429 TooManyRequests the guest got", cond)
		}
		if n := serverMetric(t, s, "setpoint_plugin_writes_throttled_total", `plugin="busy"`, `source="host_call"`); n < 1 {
			t.Errorf("host-call writes throttled = %v, want some", n)
		}
	})

	t.Run("children are written at the plugin's rate", func(t *testing.T) {
		ok(t, s, "plugin", "install", "widget", "--wasm", widgetPlugin, "--reconcile", "widgets", "--owns", "widgetprovisions")
		const n = 24
		var b strings.Builder
		for i := range n {
			b.WriteString("---\napiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: w" + strconv.Itoa(i) + ", namespace: default}\nspec: {name: w, size: small}\n")
		}
		start := time.Now()
		apply(b.String())
		waitFor("every widget's provision", func() bool {
			return strings.Count(kubectl("get", "widgetprovisions", "-o", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`), "\n") == n
		})
		took := time.Since(start)
		throttled := serverMetric(t, s, "setpoint_plugin_writes_throttled_total", `plugin="widget"`, `source="children"`)
		t.Logf("%d children at 4 writes/s, burst 10: all written after %s, %v writes throttled and retried", n, took.Round(time.Millisecond), throttled)
		if throttled < 1 || took < 2*time.Second {
			t.Errorf("%d children in %s with %v throttled: the write limit did not hold", n, took, throttled)
		}
	})
}

// A followed Plugin log does not hold the server's shutdown: it ends when
// shutdown starts, as a watch does.
func TestPluginLogFollowEndsAtShutdown(t *testing.T) {
	s := testserver.Start(t, testserver.Options{Args: []string{"--shutdown-timeout", "20s"}})
	// A Plugin whose module was never uploaded: its log exists, empty.
	plugin := `{"apiVersion":"setpoint.dev/v1alpha1","kind":"Plugin","metadata":{"name":"idle"},"spec":{"module":{"digest":"sha256:` + strings.Repeat("ab", 32) + `"}}}`
	if out, errOut, err := s.KubectlInput(plugin, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply plugin: %v %s%s", err, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := s.Command(ctx, "setpoint", "plugin", "logs", "idle", "-f")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	followed := make(chan error, 1)
	go func() { followed <- cmd.Wait() }()
	// Give the follower time to connect; it must still be following.
	time.Sleep(2 * time.Second)
	select {
	case err := <-followed:
		t.Fatalf("plugin logs -f ended before the shutdown: %v", err)
	default:
	}
	start := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	took := time.Since(start)
	t.Logf("shutdown with a followed log took %s", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("shutdown took %s with a followed log open, want it ended at once (--shutdown-timeout 20s)", took)
	}
	select {
	case <-followed:
	case <-time.After(10 * time.Second):
		t.Error("plugin logs -f still running after the server stopped")
	}
}
