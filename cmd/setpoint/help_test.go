package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// exampleResourceNames are the names `setpoint get` accepts for the kinds
// `make run` serves: those of the CustomResourceDefinitions under examples/
// (plural, singular, kind and short names) and a few built-in ones.
func exampleResourceNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, n := range []string{"namespaces", "namespace", "ns", "events", "event", "ev",
		"plugins", "plugin", "pl", "customresourcedefinitions", "customresourcedefinition", "crd", "crds"} {
		names[n] = true
	}
	files, err := filepath.Glob("../../examples/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Kind string `json:"kind"`
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Plural, Singular, Kind string
					ShortNames             []string `json:"shortNames"`
				} `json:"names"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &crd); err != nil || crd.Kind != "CustomResourceDefinition" {
			continue
		}
		n := crd.Spec.Names
		for _, name := range append([]string{n.Plural, n.Singular, strings.ToLower(n.Kind), n.Plural + "." + crd.Spec.Group}, n.ShortNames...) {
			names[name] = true
		}
	}
	if !names["widgets"] {
		t.Fatalf("no Widget CustomResourceDefinition found under examples/ (%d files)", len(files))
	}
	return names
}

// exampleModules are the modules `make plugins` builds for people to
// install: bin/wasm/NAME.wasm for plugins/NAME and bin/wasm/EXAMPLE-plugin.wasm
// for examples/EXAMPLE/plugin (the guests under host/testdata are for tests).
func exampleModules(t *testing.T) map[string]bool {
	t.Helper()
	mods := map[string]bool{}
	dirs, _ := filepath.Glob("../../plugins/*")
	for _, d := range dirs {
		mods["bin/wasm/"+filepath.Base(d)+".wasm"] = true
	}
	dirs, _ = filepath.Glob("../../examples/*/plugin")
	for _, d := range dirs {
		mods["bin/wasm/"+filepath.Base(filepath.Dir(d))+"-plugin.wasm"] = true
	}
	return mods
}

// shellFields splits a command line as a shell would, for the simple
// quoting help examples use.
func shellFields(line string) []string {
	var fields []string
	var cur strings.Builder
	in := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				fields = append(fields, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		fields = append(fields, cur.String())
	}
	return fields
}

// TestHelpExamplesNameRealThings: every example in the help texts names
// resources the example kinds have (a wrong short name made `setpoint get
// --help`'s example fail), files that exist and modules `make plugins`
// builds for the plugins they install.
func TestHelpExamplesNameRealThings(t *testing.T) {
	names := exampleResourceNames(t)
	modules := exampleModules(t)
	checkResource := func(where, arg string) {
		res, _, _ := strings.Cut(arg, "/")
		for r := range strings.SplitSeq(res, ",") {
			if !names[r] {
				t.Errorf("%s: resource %q is not a name of an example or built-in kind", where, r)
			}
		}
	}
	shortName := regexp.MustCompile(`short\s+name \(([^)]*)\)`)
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		where := cmd.CommandPath()
		for _, m := range shortName.FindAllStringSubmatch(cmd.Long, -1) {
			checkResource(where+" --help", m[1])
		}
		for line := range strings.SplitSeq(cmd.Example, "\n") {
			line, _, _ = strings.Cut(line, "#")
			f := shellFields(line)
			// Only setpoint's own command lines: cat FILE | setpoint ...
			for i, w := range f {
				if w == "|" {
					f = f[i+1:]
					break
				}
			}
			if len(f) < 2 || f[0] != "setpoint" {
				continue
			}
			// Parse the line with a fresh command tree, as setpoint would.
			ex, args, err := newRootCommand().Find(f[1:])
			if err == nil {
				err = ex.ParseFlags(args)
			}
			if err != nil {
				t.Errorf("%s: example %q does not parse: %v", where, strings.TrimSpace(line), err)
				continue
			}
			flag := func(name string) []string {
				fl := ex.Flags().Lookup(name)
				if fl == nil || !fl.Changed {
					return nil
				}
				if sv, ok := fl.Value.(interface{ GetSlice() []string }); ok {
					return sv.GetSlice()
				}
				return []string{fl.Value.String()}
			}
			for _, name := range []string{"filename", "wasm"} {
				for _, v := range flag(name) {
					if strings.HasPrefix(v, "bin/wasm/") && !modules[v] {
						t.Errorf("%s: example %q: --wasm %s is not a module `make plugins` builds for a plugin (%v)", where, strings.TrimSpace(line), v, modules)
					}
					if strings.HasPrefix(v, "examples/") {
						if _, err := os.Stat(filepath.Join("../..", v)); err != nil {
							t.Errorf("%s: example %q: %v", where, strings.TrimSpace(line), err)
						}
					}
				}
			}
			for _, name := range []string{"reconcile", "owns", "admit"} {
				for _, v := range flag(name) {
					checkResource(where+" example", v)
				}
			}
			for _, p := range flag("permissions") {
				if _, r, ok := strings.Cut(p, "="); ok && r != "events" && r != "*" {
					checkResource(where+" example", r)
				}
			}
			positional := append([]string{ex.Name()}, ex.Flags().Args()...)
			// setpoint get|describe|delete RESOURCE ...
			if len(positional) >= 2 && (positional[0] == "get" || positional[0] == "describe" || positional[0] == "delete") {
				checkResource(where+" example "+strings.TrimSpace(line), positional[1])
			}
		}
	}
	walk(newRootCommand())
}

func TestShellFields(t *testing.T) {
	got := shellFields(`  setpoint get wg -A -l 'env in (dev,prod)' -o "jsonpath={.a}"`)
	want := []string{"setpoint", "get", "wg", "-A", "-l", "env in (dev,prod)", "-o", "jsonpath={.a}"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("shellFields: %q, want %q", got, want)
	}
}
