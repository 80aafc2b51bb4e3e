package test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// widgetManifest is a Widget named name.
func widgetManifest(name, size, labels string) string {
	return "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: " + name +
		"\n  labels: {" + labels + "}\nspec:\n  name: " + strings.ToUpper(name) + "\n  size: " + size + "\n"
}

// TestKubectl drives the built server with the real kubectl over HTTPS and
// the generated kubeconfig: the acceptance list of the API.
func TestKubectl(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	dir := t.TempDir()
	kubectl := func(t *testing.T, args ...string) string {
		t.Helper()
		out, errOut, err := s.Kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	apply := func(t *testing.T, manifest string, args ...string) string {
		t.Helper()
		out, errOut, err := s.KubectlInput(manifest, append([]string{"apply", "-f", "-"}, args...)...)
		if err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
		}
		return out
	}

	t.Run("CRD", func(t *testing.T) {
		if out := kubectl(t, "apply", "-f", "../examples/widget/crd.yaml"); !strings.Contains(out, "widgets.example.setpoint.dev created") {
			t.Fatalf("apply CRD: %s", out)
		}
		kubectl(t, "wait", "--for=condition=Established", "crd/widgets.example.setpoint.dev", "--timeout=20s")
		if out := kubectl(t, "api-resources", "--api-group=example.setpoint.dev"); !strings.Contains(out, "widgets") || !strings.Contains(out, "wg") {
			t.Fatalf("api-resources: %s", out)
		}
		// As in Kubernetes, a CRD's row shows when it was created, not an age.
		if out := kubectl(t, "get", "crd", "widgets.example.setpoint.dev"); !regexp.MustCompile(
			`^NAME +CREATED AT\nwidgets\.example\.setpoint\.dev +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$`).MatchString(out) {
			t.Errorf("get crd:\n%s", out)
		}
		out := kubectl(t, "explain", "widget.spec")
		for _, want := range []string{"size", "enum: small, medium, large", "-required-"} {
			if !strings.Contains(out, want) {
				t.Errorf("explain widget.spec lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("get", func(t *testing.T) {
		apply(t, widgetManifest("foo", "small", "env: dev"))
		apply(t, widgetManifest("bar", "medium", "env: prod"))
		apply(t, widgetManifest("baz", "large", "env: test"))
		out := kubectl(t, "get", "widgets")
		for _, want := range []string{"NAME", "DISPLAY", "SIZE", "STATE", "AGE", "foo", "FOO", "medium"} {
			if !strings.Contains(out, want) {
				t.Errorf("get widgets lacks %q:\n%s", want, out)
			}
		}
		if out := kubectl(t, "get", "wg", "foo"); !strings.Contains(out, "foo") {
			t.Errorf("get wg foo: %s", out)
		}
		if out := kubectl(t, "get", "widget", "foo", "-o", "yaml"); !strings.Contains(out, "size: small") || !strings.Contains(out, "resourceVersion:") {
			t.Errorf("-o yaml: %s", out)
		}
		if out := kubectl(t, "get", "widget", "foo", "-o", "json"); !strings.Contains(out, `"size": "small"`) {
			t.Errorf("-o json: %s", out)
		}
		if out := kubectl(t, "get", "widgets", "-l", "env in (dev,prod)", "-o", "jsonpath={.items[*].metadata.name}"); out != "bar foo" {
			t.Errorf("-l 'env in (dev,prod)' = %q, want \"bar foo\"", out)
		}
		if out := kubectl(t, "get", "ns"); !strings.Contains(out, "default") || !strings.Contains(out, "Active") {
			t.Errorf("get ns: %s", out)
		}
	})

	t.Run("apply", func(t *testing.T) {
		path := filepath.Join(dir, "qux.yaml")
		write := func(m string) {
			if err := os.WriteFile(path, []byte(m), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write(widgetManifest("qux", "small", "env: dev, team: a"))
		if out := kubectl(t, "apply", "-f", path); !strings.Contains(out, "created") {
			t.Fatalf("create: %s", out)
		}
		rv := kubectl(t, "get", "widget", "qux", "-o", "jsonpath={.metadata.resourceVersion}")
		if out := kubectl(t, "apply", "-f", path); !strings.Contains(out, "unchanged") {
			t.Fatalf("unchanged re-apply: %s", out)
		}
		if rv2 := kubectl(t, "get", "widget", "qux", "-o", "jsonpath={.metadata.resourceVersion}"); rv2 != rv {
			t.Fatalf("resourceVersion %s -> %s after an unchanged apply", rv, rv2)
		}
		write(widgetManifest("qux", "large", "env: dev"))
		if out := kubectl(t, "apply", "-f", path); !strings.Contains(out, "configured") {
			t.Fatalf("changed re-apply: %s", out)
		}
		if got := kubectl(t, "get", "widget", "qux", "-o", "jsonpath={.spec.size} {.metadata.labels} {.metadata.generation}"); got != `large {"env":"dev"} 2` {
			t.Fatalf("after the three-way merge: %s", got)
		}
		if out := kubectl(t, "delete", "-f", path); !strings.Contains(out, "deleted") {
			t.Fatalf("delete -f: %s", out)
		}
		if _, _, err := s.Kubectl("get", "widget", "qux"); err == nil {
			t.Fatal("qux still there after delete -f")
		}
	})

	t.Run("label annotate patch", func(t *testing.T) {
		kubectl(t, "label", "widget", "foo", "tier=gold")
		kubectl(t, "annotate", "widget", "foo", "note=hello")
		kubectl(t, "patch", "widget", "foo", "--type=merge", "-p", `{"spec":{"size":"medium"}}`)
		kubectl(t, "patch", "widget", "foo", "--type=json", "-p", `[{"op":"replace","path":"/spec/name","value":"Renamed"}]`)
		got := kubectl(t, "get", "widget", "foo", "-o", "jsonpath={.metadata.labels.tier} {.metadata.annotations.note} {.spec.size} {.spec.name}")
		if got != "gold hello medium Renamed" {
			t.Fatalf("after label, annotate and patches: %q", got)
		}
	})

	t.Run("invalid objects", func(t *testing.T) {
		tests := []struct {
			name     string
			manifest string
			args     []string
			want     []string
		}{
			{name: "bad enum", manifest: widgetManifest("bad", "huge", ""), want: []string{"spec.size", `Unsupported value: "huge"`}},
			{name: "missing required", manifest: "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  size: small\n",
				want: []string{"spec.name", "Required value"}},
			{name: "wrong type", manifest: "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  name: 42\n  size: small\n",
				want: []string{"spec.name", "must be of type string"}},
			{name: "unknown field", manifest: widgetManifest("bad", "small", "") + "  bogus: true\n", args: []string{"--validate=strict"},
				want: []string{`unknown field "spec.bogus"`}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				out, errOut, err := s.KubectlInput(tt.manifest, append([]string{"apply", "-f", "-"}, tt.args...)...)
				if err == nil {
					t.Fatalf("accepted: %s", out)
				}
				for _, w := range tt.want {
					if !strings.Contains(errOut, w) {
						t.Errorf("stderr lacks %q:\n%s", w, errOut)
					}
				}
			})
		}
	})

	t.Run("watch and wait", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		w := s.Command(ctx, "kubectl", "get", "widgets", "-w", "--output-watch-events")
		stdout, err := w.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = w.Wait() }()
		events := make(chan []string, 64)
		go func() {
			defer close(events)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				events <- strings.Fields(sc.Text())
			}
		}()
		// The initial list shows foo as ADDED: the watch is running.
		waitEvent(t, events, "ADDED", "foo")

		apply(t, widgetManifest("w1", "small", ""))
		waitCmd := s.Command(ctx, "kubectl", "wait", "--for=condition=Ready", "widget/w1", "--timeout=30s")
		var waitOut strings.Builder
		waitCmd.Stdout, waitCmd.Stderr = &waitOut, &waitOut
		if err := waitCmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The condition is written through the /status subresource.
		status := `{"status":{"state":"Ready","lastProvisioned":"2026-01-02T03:04:05Z","conditions":[{"type":"Ready","status":"True","reason":"Provisioned","lastTransitionTime":"2026-01-02T03:04:05Z"}]}}`
		kubectl(t, "patch", "widget", "w1", "--subresource=status", "--type=merge", "-p", status)
		if err := waitCmd.Wait(); err != nil || !strings.Contains(waitOut.String(), "condition met") {
			t.Fatalf("kubectl wait: %v\n%s", err, waitOut.String())
		}
		kubectl(t, "delete", "widget", "w1")
		waitEvent(t, events, "ADDED", "w1")
		waitEvent(t, events, "MODIFIED", "w1")
		waitEvent(t, events, "DELETED", "w1")
	})

	t.Run("delete -l", func(t *testing.T) {
		if out := kubectl(t, "delete", "widgets", "-l", "env=dev"); !strings.Contains(out, "foo") {
			t.Fatalf("delete -l env=dev: %s", out)
		}
		if out := kubectl(t, "get", "widgets", "-o", "jsonpath={.items[*].metadata.name}"); out != "bar baz" {
			t.Fatalf("left after delete -l: %q", out)
		}
	})

	// A CRD whose schema gains a defaulted field and loses another changes
	// how existing objects read, as in Kubernetes, through get and list.
	t.Run("schema change", func(t *testing.T) {
		crd := func(fields string) string {
			return testsupport.CRD{Kind: "Gauge", Schema: `
type: object
properties:
  spec:
    type: object
    properties: {` + fields + `}
`}.String()
		}
		apply(t, crd("name: {type: string}, legacy: {type: string}"))
		kubectl(t, "wait", "--for=condition=Established", "crd/gauges.example.setpoint.dev", "--timeout=20s")
		apply(t, "apiVersion: example.setpoint.dev/v1\nkind: Gauge\nmetadata: {name: g1}\nspec: {name: a, legacy: x}\n")
		apply(t, crd("name: {type: string}, tier: {type: string, default: gold}"))
		if got := kubectl(t, "get", "gauge", "g1", "-o", "jsonpath={.spec}"); got != `{"name":"a","tier":"gold"}` {
			t.Errorf("get after the schema change: %s", got)
		}
		if got := kubectl(t, "get", "gauges", "-o", "jsonpath={.items[*].spec}"); got != `{"name":"a","tier":"gold"}` {
			t.Errorf("list after the schema change: %s", got)
		}
	})

	// A namespace held Terminating by a finalizer of its content: the
	// kubernetes.io/metadata.name label, the status.phase field selector and
	// the conditions kubectl describe shows, as in Kubernetes.
	t.Run("terminating namespace", func(t *testing.T) {
		kubectl(t, "create", "namespace", "qa2")
		apply(t, "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: held, namespace: qa2, finalizers: [example.setpoint.dev/hold]}\nspec: {name: held, size: medium}\n")
		if out := kubectl(t, "get", "ns", "-l", "kubernetes.io/metadata.name=qa2", "-o", "name"); out != "namespace/qa2\n" {
			t.Errorf("get ns -l kubernetes.io/metadata.name=qa2: %q", out)
		}
		kubectl(t, "delete", "ns", "qa2", "--wait=false")
		if out := kubectl(t, "get", "ns", "--field-selector", "status.phase=Terminating", "-o", "name"); out != "namespace/qa2\n" {
			t.Errorf("get ns --field-selector status.phase=Terminating: %q", out)
		}
		testsupport.Poll(t, 20*time.Second, "the deletion conditions in describe ns qa2", func() (bool, string) {
			out := kubectl(t, "describe", "ns", "qa2")
			return strings.Contains(out, "NamespaceContentRemaining") && strings.Contains(out, "widgets.example.setpoint.dev has 1 resource instances") &&
				strings.Contains(out, "NamespaceFinalizersRemaining") && strings.Contains(out, "example.setpoint.dev/hold in 1 resource instances") &&
				strings.Contains(out, "NamespaceDeletionDiscoveryFailure"), "\n" + out
		})
		kubectl(t, "patch", "widget", "held", "-n", "qa2", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		kubectl(t, "wait", "--for=delete", "ns/qa2", "--timeout=20s")
	})

	// CRD selectableFields (Kubernetes 1.32, KEP-4358): --field-selector on
	// the fields the served version declares, refused on others.
	t.Run("selectable fields", func(t *testing.T) {
		apply(t, testsupport.CRD{Group: "qa.setpoint.dev", Kind: "Gizmo", SelectableFields: []string{".spec.color", ".spec.count"}, Schema: `
type: object
properties:
  spec:
    type: object
    properties: {color: {type: string}, count: {type: integer}, size: {type: string}}
`}.String())
		kubectl(t, "wait", "--for=condition=Established", "crd/gizmos.qa.setpoint.dev", "--timeout=20s")
		for _, g := range []string{"g1 c1 1", "g2 c2 2", "g3 c1 3"} {
			f := strings.Fields(g)
			apply(t, "apiVersion: qa.setpoint.dev/v1\nkind: Gizmo\nmetadata: {name: "+f[0]+"}\nspec: {color: "+f[1]+", count: "+f[2]+", size: s}\n")
		}
		for sel, want := range map[string]string{
			"spec.color=c1":               "g1 g3",
			"spec.color!=c1":              "g2",
			"spec.count=3":                "g3",
			"spec.color=c1,spec.count!=1": "g3",
		} {
			if got := kubectl(t, "get", "gizmos", "--field-selector", sel, "-o", "jsonpath={.items[*].metadata.name}"); got != want {
				t.Errorf("get gizmos --field-selector %s: %q, want %q", sel, got, want)
			}
		}
		out, errOut, err := s.Kubectl("get", "gizmos", "--field-selector", "spec.size=s")
		if err == nil || !strings.Contains(errOut, "field label not supported: spec.size") {
			t.Errorf("get gizmos --field-selector spec.size=s: %v\n%s%s", err, out, errOut)
		}
	})
}

// waitEvent reads kubectl get -w --output-watch-events lines until one shows
// typ for name.
func waitEvent(t *testing.T, events <-chan []string, typ, name string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case f, ok := <-events:
			if !ok {
				t.Fatalf("kubectl get -w ended before %s %s", typ, name)
			}
			if len(f) > 1 && f[0] == typ && f[1] == name {
				return
			}
		case <-deadline:
			t.Fatalf("no %s %s from kubectl get -w in 30s", typ, name)
		}
	}
}
