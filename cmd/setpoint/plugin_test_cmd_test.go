package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/host/hosttest"
)

func TestPluginTest(t *testing.T) {
	widget, labels := hosttest.Path(t, "widget-plugin"), hosttest.Path(t, "requiredlabels")
	cache := hosttest.CacheDir(t)
	const crd, obj = "../../examples/widget/crd.yaml", "../../examples/widget/widget.yaml"
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	provision := write("provision.yaml", `apiVersion: example.setpoint.dev/v1
kind: WidgetProvision
metadata: {name: demo, labels: {example.setpoint.dev/widget: demo}}
spec: {widget: Demo widget, size: small, capacity: 1}
`)
	huge := write("huge.yaml", "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: demo}\nspec: {name: x, size: huge}\n")
	labelled := write("labelled.yaml", "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: demo, labels: {team: a}}\nspec: {name: x, size: small}\n")
	provCRD, err := os.ReadFile("../../examples/widget/provision-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const provisionCRD = "../../examples/widget/provision-crd.yaml"
	strictCRD := write("strict-provision-crd.yaml", strings.Replace(string(provCRD), "enum: [small, medium, large]", "enum: [medium, large]", 1))
	notCRD := write("notcrd.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.setpoint.dev}\nspec: {group: example.setpoint.dev}\n")

	tests := []struct {
		name string
		args []string
		code int
		// want are "path=value" checks on the YAML report (code 0), or
		// substrings of stderr (other codes).
		want []string
	}{
		{name: "first reconcile creates the child", args: []string{widget, "--crd", crd, "--object", obj}, want: []string{
			"reconcile.status.state=Provisioning", "reconcile.children.0.op=create", "reconcile.children.0.object.metadata.namespace=default",
			"reconcile.children.0.object.metadata.ownerReferences.0.controller=true", "reconcile.status.conditions.0.status=True",
			"reconcile.status.observedGeneration=1", "object.spec.color=gray"}},
		{name: "children checked against their CRD", args: []string{widget, "--crd", crd, "--crd", provisionCRD, "--object", obj}, want: []string{
			"reconcile.children.0.op=create", "reconcile.error=<nil>"}},
		{name: "child the server would refuse", args: []string{widget, "--crd", crd, "--crd", strictCRD, "--object", obj}, code: exitFailure,
			want: []string{"the server would refuse the child", "spec.size"}},
		{name: "no CRD for the object", args: []string{widget, "--crd", provisionCRD, "--object", obj}, code: exitInvalid, want: []string{"no --crd serves that kind"}},
		{name: "observed child: Ready, nothing to write", args: []string{widget, "--crd", crd, "--object", obj, "--children", provision}, want: []string{
			"reconcile.status.state=Ready", "reconcile.children=<nil>"}},
		{name: "plugin error fails", args: []string{widget, "--crd", crd, "--object", obj, "--memory-pages", "1"}, code: exitFailure, want: []string{"loading"}},
		{name: "invalid object", args: []string{widget, "--crd", crd, "--object", huge}, code: exitInvalid, want: []string{"the server would refuse the object", "spec.size"}},
		{name: "invalid CRD", args: []string{widget, "--crd", notCRD, "--object", obj}, code: exitInvalid, want: []string{"the server would refuse this CRD"}},
		{name: "no admit export", args: []string{widget, "--crd", crd, "--object", obj, "--admission", "create"}, code: exitUsage, want: []string{"no admit export"}},
		{name: "admission denial is a verdict", args: []string{labels, "--crd", crd, "--object", obj, "--admission", "create", "--config", "labels=team"}, want: []string{
			"admission.allowed=false", "admission.code=422", "admission.message=Widget demo is missing required labels: team", "reconcile=<nil>"}},
		{name: "admission allows", args: []string{labels, "--crd", crd, "--object", labelled, "--admission", "create", "--config", "labels=team"}, want: []string{
			"admission.allowed=true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCmd(t, "", append([]string{"plugin", "test", "--cache-dir", cache}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			if code != 0 {
				for _, w := range tt.want {
					if !strings.Contains(errOut, w) {
						t.Errorf("stderr %q lacks %q", errOut, w)
					}
				}
				return
			}
			var report map[string]any
			if err := yaml.Unmarshal([]byte(out), &report); err != nil {
				t.Fatalf("report is not YAML: %v\n%s", err, out)
			}
			for _, w := range tt.want {
				p, v, _ := strings.Cut(w, "=")
				if got := lookup(report, p); got != v {
					t.Errorf("%s = %s, want %s\n%s", p, got, v, out)
				}
			}
		})
	}
}

// lookup returns the value at a dotted path (list indexes as numbers) as
// text, "<nil>" when absent.
func lookup(v any, path string) string {
	for _, k := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			v = c[k]
		case []any:
			i := 0
			for _, r := range k {
				i = i*10 + int(r-'0')
			}
			if i >= len(c) {
				return "<nil>"
			}
			v = c[i]
		default:
			return "<nil>"
		}
	}
	switch v := v.(type) {
	case nil:
		return "<nil>"
	case string:
		return v
	}
	return strings.TrimSpace(string(must(yaml.Marshal(v))))
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
