package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestPluginRBAC runs a reconcile plugin that writes Notes through the
// host against the real server, and checks that its writes are decided by
// RBAC as its own user: its permissions are a ClusterRole kubectl shows,
// a rule an administrator takes out of it (annotated autoupdate "false",
// so that the manager leaves it as edited) refuses the plugin's write with
// an error naming the access and the ClusterRole, and once the annotation
// is gone the manager puts the rule back and the widget converges.
func TestPluginRBAC(t *testing.T) {
	writer := wasmModule(t, "writer")
	s := testserver.Start(t, testserver.Options{})
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
		t.Helper()
		out, errOut, err := s.Kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	get := func(args ...string) string {
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
	ready := func(name string) string {
		return get("get", "widget", name, "-o", `jsonpath={.status.state}/{.status.conditions[?(@.type=="Ready")].status}/{.status.provision}`)
	}

	ok(t, s, "plugin", "install", "notes", "--wasm", writer, "--reconcile", "widgets",
		"--permissions", "read=widgets,write=notes,write=events", "--config", "op=ensure")
	widget("w1", "small")
	eventually(t, "widget w1", time.Minute, "Ready/True/w1-note", func() string { return ready("w1") })

	// The plugin's permissions are RBAC: its ClusterRole, bound to its user.
	const role = "clusterrole/setpoint:plugin:notes"
	if got := get("auth", "can-i", "create", "notes.example.setpoint.dev", "--as", "system:setpoint:plugin:notes"); strings.TrimSpace(got) != "yes" {
		t.Fatalf("kubectl auth can-i create notes --as the plugin: %q, want yes", got)
	}
	var cr rbacv1.ClusterRole
	if err := json.Unmarshal([]byte(kubectl("get", role, "-o", "json")), &cr); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "notes") && slices.Contains(r.Verbs, "create")
	})
	if i < 0 {
		t.Fatalf("%s grants no create of notes: %+v", role, cr.Rules)
	}

	// An administrator takes the rule out, and keeps the manager from
	// putting it back.
	kubectl("annotate", role, rbacv1.AutoUpdateAnnotationKey+"=false")
	kubectl("patch", role, "--type=json", "-p", fmt.Sprintf(`[{"op":"remove","path":"/rules/%d"}]`, i))
	want := `User "system:setpoint:plugin:notes" cannot create resource "notes" in API group "example.setpoint.dev" in the namespace "default"`
	eventually(t, "kubectl auth can-i for the plugin", 30*time.Second, "no", func() string {
		return strings.TrimSpace(get("auth", "can-i", "create", "notes.example.setpoint.dev", "--as", "system:setpoint:plugin:notes"))
	})
	widget("w2", "small")
	var cond string
	eventually(t, "widget w2 denied", time.Minute, "False/denied", func() string {
		cond = get("get", "widget", "w2", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].message}`)
		st, msg, _ := strings.Cut(cond, "|")
		if strings.Contains(msg, want) && strings.Contains(msg, "ClusterRole setpoint:plugin:notes") && strings.Contains(msg, "code 403") {
			msg = "denied"
		}
		return st + "/" + msg
	})
	if out := get("get", "note", "w2-note", "--ignore-not-found"); out != "" {
		t.Errorf("a denied note was stored: %q", out)
	}

	// The annotation gone, the manager's next reconcile of the Plugin puts
	// the rule back, and the widget's next reconcile converges.
	kubectl("annotate", role, rbacv1.AutoUpdateAnnotationKey+"-")
	kubectl("label", "plugin", "notes", "test.setpoint.dev/touched=1")
	eventually(t, "kubectl auth can-i for the plugin", 30*time.Second, "yes", func() string {
		return strings.TrimSpace(get("auth", "can-i", "create", "notes.example.setpoint.dev", "--as", "system:setpoint:plugin:notes"))
	})
	widget("w2", "medium")
	eventually(t, "widget w2 once the rule is back", time.Minute, "Ready/True/w2-note", func() string { return ready("w2") })
}
