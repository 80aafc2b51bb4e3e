package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// tenantCRD is a cluster-scoped kind, whose objects may own cluster-scoped
// children such as Plugins.
var tenantCRD = testsupport.CRD{
	Kind: "Tenant", Scope: "Cluster", Status: true,
	Schema: `
type: object
x-kubernetes-preserve-unknown-fields: true
`,
}.String()

// owns is no write grant: on the real server, a plugin with no permissions
// whose spec owns plugins.setpoint.dev and whose reconcile desires a Plugin
// with read and write on everything is refused, and no such Plugin is
// created; an administrator's spec.privileged lets it write Plugins, but
// only Plugins whose permissions its own user holds (no escalation through
// a plugin, as RBAC's installer check says).
func TestOwnsCannotEscalate(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ok(t, s, "apply", "-f", writeFiles(t, map[string]string{"crd.yaml": tenantCRD})+"/crd.yaml")
	digest := mustUpload(t, s, builtModule(t, "childmaker"))
	childSpec := func(permissions map[string]any) string {
		spec := map[string]any{"module": map[string]any{"digest": digest}, "reconcile": map[string]any{"for": "tenants.example.setpoint.dev"}}
		if permissions != nil {
			spec["permissions"] = permissions
		}
		child, _ := json.Marshal([]any{map[string]any{
			"apiVersion": "setpoint.dev/v1alpha1", "kind": "Plugin", "metadata": map[string]any{"name": "pwned"}, "spec": spec,
		}})
		children, _ := json.Marshal(string(child))
		return string(children)
	}
	everything := childSpec(map[string]any{"read": []any{"*"}, "write": []any{"*"}})
	escalateWith := func(privileged bool, children string) string {
		return pluginManifest("escalate", digest, "  reconcile: {for: tenants.example.setpoint.dev, owns: [plugins.setpoint.dev]}\n"+
			"  config: {children: "+children+"}\n"+map[bool]string{true: "  privileged: true\n"}[privileged])
	}
	escalate := func(privileged bool) string { return escalateWith(privileged, everything) }
	applyPlugin(t, s, escalate(false))
	if out, errOut, err := s.KubectlInput("apiVersion: example.setpoint.dev/v1\nkind: Tenant\nmetadata: {name: acme}\n", "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply tenant: %v\n%s%s", err, out, errOut)
	}
	st := waitPlugin(t, s, "escalate", 20*time.Second, func(st pluginStatus) bool {
		_, reason, _ := st.condition("Loaded")
		return st.Phase == "Failed" && reason == "InvalidSpec"
	})
	if _, _, msg := st.condition("Loaded"); !strings.Contains(msg, "spec.reconcile.owns names plugins.setpoint.dev") || !strings.Contains(msg, "spec.privileged: true") {
		t.Errorf("Loaded message: %q", msg)
	}
	time.Sleep(time.Second)
	if code, body, _ := s.Do("GET", pluginsPath+"/pwned", s.Token, nil); code != 404 {
		t.Fatalf("the plugin created the Plugin pwned: %d %s", code, body)
	}

	// An administrator's consent lets the plugin write Plugins, but not one
	// that asks for more than the plugin's own user holds.
	applyPlugin(t, s, escalate(true))
	testsupport.Poll(t, 20*time.Second, "the child Plugin refused as an escalation", func() (bool, string) {
		st := getPlugin(t, s, "escalate")
		return strings.Contains(st.LastError, "permissions not currently held"), fmt.Sprintf("%+v", st)
	})
	if code, body, _ := s.Do("GET", pluginsPath+"/pwned", s.Token, nil); code != 404 {
		t.Fatalf("the plugin created a Plugin with permissions it does not hold: %d %s", code, body)
	}

	// A child within the plugin's own rights (reconciling tenants, as it does).
	applyPlugin(t, s, escalateWith(true, childSpec(nil)))
	testsupport.Poll(t, 20*time.Second, "a privileged plugin's child Plugin created", func() (bool, string) {
		code, _, _ := s.Do("GET", pluginsPath+"/pwned", s.Token, nil)
		if code == 200 {
			return true, ""
		}
		return false, fmt.Sprintf("%d; %+v", code, getPlugin(t, s, "escalate"))
	})
}
