package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// noteCRD is the kind the writer guest writes through the host (see
// host/testdata/guests/writer): a schema that admits only two sizes, and a
// status subresource.
var noteCRD = testsupport.CRD{
	Kind: "Note", Status: true,
	Schema: `
type: object
properties:
  spec:
    type: object
    properties:
      size: {type: string, enum: [small, medium]}
      widget: {type: string}
  status:
    type: object
    x-kubernetes-preserve-unknown-fields: true
`,
}.String()

// eventually polls get until it returns want, and fails with the last
// value after timeout.
func eventually(t *testing.T, what string, timeout time.Duration, want string, get func() string) {
	t.Helper()
	testsupport.Poll(t, timeout, fmt.Sprintf("%s = %q", what, want), func() (bool, string) {
		got := get()
		return got == want, fmt.Sprintf("%q", got)
	})
}

// TestPluginWrites runs a reconcile plugin that writes objects of another
// kind through the write host functions, against the real server: installed
// with the CLI's --permissions write=KIND, its writes pass through schema
// validation and other plugins' admission as the user
// system:setpoint:plugin:<name>, create, patch, patch the status of and
// delete Notes, and once the permission is taken away the denial reaches the widget's Ready condition (a denied host
// call is an error of the plugin's handler, not a failed call, so the
// Plugin's lastError does not show it).
func TestPluginWrites(t *testing.T) {
	writer := wasmModule(t, "writer")
	s := testserver.Start(t, testserver.Options{Args: []string{"--plugin-status-interval", "500ms"}})
	crd, err := os.ReadFile(filepath.Join("..", "examples", "widget", "crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{string(crd), noteCRD} {
		if out, errOut, err := s.KubectlInput(m, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply CRD: %v\n%s%s", err, out, errOut)
		}
	}
	kubectl := func(args ...string) string {
		out, _, _ := s.Kubectl(args...)
		return out
	}
	widget := func(name, size string) {
		t.Helper()
		m := "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: " + name + ", namespace: default}\nspec: {name: " + name + ", size: " + size + "}\n"
		if out, errOut, err := s.KubectlInput(m, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply widget %s: %v %s%s", name, err, out, errOut)
		}
	}

	// The CLI passes write kinds through as the server names them.
	ok(t, s, "plugin", "install", "notes", "--wasm", writer, "--reconcile", "widgets",
		"--permissions", "read=widgets,write=notes,write=events", "--config", "op=ensure")
	if perms := kubectl("get", "plugin", "notes", "-o", "jsonpath={.spec.permissions.write[*]}"); perms != "notes.example.setpoint.dev events" {
		t.Fatalf("--permissions write=notes,write=events gave spec.permissions.write %q", perms)
	}
	// A mutating admission plugin on notes (the same module) records who
	// writes them.
	ok(t, s, "plugin", "install", "who", "--wasm", writer, "--admit", "notes", "--mutating", "--config", "op=annotate-user")

	t.Run("create, patch and delete through the host", func(t *testing.T) {
		widget("w1", "small")
		eventually(t, "widget w1", time.Minute, "Ready/True/w1-note", func() string {
			return kubectl("get", "widget", "w1", "-o", `jsonpath={.status.state}/{.status.conditions[?(@.type=="Ready")].status}/{.status.provision}`)
		})
		got := kubectl("get", "note", "w1-note", "-o", `jsonpath={.spec.size}/{.spec.widget}/{.status.observedSize}/{.metadata.annotations.test\.setpoint\.dev/written-by}`)
		if got != "small/w1/small/system:setpoint:plugin:notes" {
			t.Errorf("note w1-note: %q, want small/w1/small/system:setpoint:plugin:notes (spec, status and the writing user)", got)
		}
		// The next reconcile finds the Note and merge-patches it.
		widget("w1", "medium")
		eventually(t, "note w1-note after the widget grew", time.Minute, "medium/medium", func() string {
			return kubectl("get", "note", "w1-note", "-o", "jsonpath={.spec.size}/{.status.observedSize}")
		})
		// Finalize deletes it with the widget.
		if out, errOut, err := s.Kubectl("delete", "widget", "w1", "--timeout=60s"); err != nil {
			t.Fatalf("delete widget: %v %s%s", err, out, errOut)
		}
		eventually(t, "note w1-note after its widget went", time.Minute, "", func() string {
			return kubectl("get", "notes", "-o", "jsonpath={.items[*].metadata.name}")
		})
	})

	t.Run("schema validation applies to plugin writes", func(t *testing.T) {
		widget("w-large", "large") // a Widget may be large, a Note may not
		eventually(t, "widget w-large", time.Minute, "False", func() string {
			return kubectl("get", "widget", "w-large", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		})
		msg := kubectl("get", "widget", "w-large", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		if !strings.Contains(msg, "spec.size") || !strings.Contains(msg, "(reason Invalid, code 422)") {
			t.Errorf("Ready message %q, want the schema's complaint about spec.size with reason Invalid, code 422", msg)
		}
		if out, _, _ := s.Kubectl("get", "note", "w-large-note"); out != "" {
			t.Errorf("an invalid note was stored: %q", out)
		}
	})

	t.Run("without the permission the write is denied", func(t *testing.T) {
		if out, errOut, err := s.Kubectl("patch", "plugin", "notes", "--type", "merge", "-p", `{"spec":{"permissions":{"write":["events"]}}}`); err != nil {
			t.Fatalf("patch plugin: %v %s%s", err, out, errOut)
		}
		want := `host: permission denied: plugin "notes" may not write Note.example.setpoint.dev (reason Forbidden, code 403)`
		// The new permissions take effect once the plugin is reinstalled
		// with them; widgets reconciled from then on are denied.
		deadline := time.Now().Add(time.Minute)
		for i := 0; ; i++ {
			name := "w-denied-" + string(rune('a'+i%26))
			widget(name, "small")
			cond := ""
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
				cond = kubectl("get", "widget", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].message}`)
				if cond != "" && cond != "|" {
					break
				}
			}
			if strings.HasPrefix(cond, "False|") && strings.Contains(cond, want) {
				out, _, _ := s.Kubectl("get", "note", name+"-note")
				if out == "" {
					break
				}
				// A widget created while the Plugin was being reinstalled
				// may have had its note written by the module with the old
				// permissions, and only a later reconcile denied: try the
				// next widget. Were writes not denied, no widget would ever
				// be denied without its note, and the deadline fails.
				t.Logf("widget %s raced the reinstall: its note was stored before the denial: %q", name, out)
			}
			if time.Now().After(deadline) {
				t.Fatalf("widget %s: Ready %q, want False with %q and no note stored", name, cond, want)
			}
		}
	})
}
