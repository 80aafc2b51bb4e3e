package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	initapi "github.com/setpoint-dev/setpoint/cmd/setpoint/templates/plugin/api"
	"github.com/setpoint-dev/setpoint/sdk/schema"
)

// TestPluginInit checks what plugin init writes; test/authoring_test.go
// builds, tests and installs it.
func TestPluginInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gadget")
	out, errOut, code := runCmd(t, "", "plugin", "init", "gadget", "--group", "example.setpoint.dev", "--kind", "Gadget", "--admission", "--dir", dir)
	if code != 0 || !strings.Contains(out, "make test") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{"go.mod", "main.go", "main_test.go", "realhost_test.go", "api/types.go", "api/kind.go", "cmd/crdgen/main.go",
		"crd.yaml", "example.yaml", "Makefile", "README.md", ".gitignore", "sdk/go.mod", "sdk/typed/typed.go", "sdk/guest/wasm.go", "sdk/realhost/realhost.go"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	filepath.WalkDir(filepath.Join(dir, "sdk"), func(p string, d os.DirEntry, err error) error {
		if strings.HasSuffix(p, "_test.go") {
			t.Errorf("the SDK copy holds a test file: %s", p)
		}
		return err
	})
	main, _ := os.ReadFile(filepath.Join(dir, "main.go"))
	if !strings.Contains(string(main), "Admit:     typed.Admit(admit)") {
		t.Errorf("main.go lacks the admission handler:\n%s", main)
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if !strings.Contains(string(gomod), "replace github.com/setpoint-dev/setpoint/sdk => ./sdk") {
		t.Errorf("go.mod:\n%s", gomod)
	}

	// crd.yaml is the generator's CRD of the embedded types (what `make
	// crd` writes), reads back as the same document, and the server's CRD
	// checks accept it.
	b, err := os.ReadFile(filepath.Join(dir, "crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(schema.CRD(schema.Kind{Group: "example.setpoint.dev", Version: "v1", Kind: "Gadget", Plural: "gadgets",
		Spec: initapi.Spec{}, Status: initapi.Status{}, Columns: []string{"State=.status.state", "Greeting=.status.greeting"}}))
	json.Unmarshal(wantJSON, &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("crd.yaml reads as\n%v\nwant\n%v", got, want)
	}
	if _, err := loadCRD(filepath.Join(dir, "crd.yaml")); err != nil {
		t.Errorf("the CRD checks refuse crd.yaml: %v", err)
	}

	// --sdk-only rewrites the SDK copy alone.
	os.RemoveAll(filepath.Join(dir, "sdk", "typed"))
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main // kept\n"), 0o644)
	if _, errOut, code := runCmd(t, "", "plugin", "init", "--sdk-only", dir); code != 0 {
		t.Fatal(errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "sdk", "typed", "typed.go")); err != nil {
		t.Errorf("--sdk-only did not restore the SDK: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); string(b) != "package main // kept\n" {
		t.Errorf("--sdk-only rewrote main.go")
	}

	// Without --admission: no admit handler or test.
	plain := filepath.Join(t.TempDir(), "plain")
	if _, errOut, code := runCmd(t, "", "plugin", "init", "plain", "--group", "example.setpoint.dev", "--kind", "Plain", "--dir", plain); code != 0 {
		t.Fatal(errOut)
	}
	for _, f := range []string{"main.go", "main_test.go"} {
		if b, _ := os.ReadFile(filepath.Join(plain, f)); strings.Contains(string(b), "admit") {
			t.Errorf("%s mentions admit without --admission:\n%s", f, b)
		}
	}
}

func TestPluginInitRefuses(t *testing.T) {
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"bad name", []string{"Gadget", "--group", "example.setpoint.dev", "--kind", "Gadget"}, exitUsage, "want a DNS label"},
		{"group without a dot", []string{"gadget", "--group", "example", "--kind", "Gadget"}, exitUsage, "--group"},
		{"lower-case kind", []string{"gadget", "--group", "example.setpoint.dev", "--kind", "gadget"}, exitUsage, "--kind"},
		{"other language", []string{"gadget", "--group", "example.setpoint.dev", "--kind", "Gadget", "--language", "rust"}, exitUsage, "docs/ABI.md"},
		{"directory not empty", []string{"gadget", "--group", "example.setpoint.dev", "--kind", "Gadget", "--dir", full}, exitConflict, "not empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runCmd(t, "", append([]string{"plugin", "init"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.msg) {
				t.Fatalf("exit %d %q, want %d with %q", code, errOut, tt.code, tt.msg)
			}
		})
	}
}
