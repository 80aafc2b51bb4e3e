package test

import (
	"encoding/json"
	"io"
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/setpoint-dev/setpoint"

// goPackage is the part of `go list -json` the layout checks read.
type goPackage struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

// listPackages returns every package of the main module with its direct imports.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = ".."
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(out)
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	return pkgs
}

// rule says which of our own packages a set of packages must not import.
type rule struct {
	name      string
	from      func(pkg string) bool
	forbid    func(imp string) bool
	violation [2]string // a package and an import that break the rule
}

func under(prefixes ...string) func(string) bool {
	return func(p string) bool {
		for _, pre := range prefixes {
			full := module + "/" + pre
			if p == full || strings.HasPrefix(p, full+"/") {
				return true
			}
		}
		return false
	}
}

func exactly(names ...string) func(string) bool {
	return func(p string) bool {
		for _, n := range names {
			if p == module+"/"+n {
				return true
			}
		}
		return false
	}
}

// harness reports whether p exists for tests: the packages under test/ and
// those named for the package they test (host/hosttest,
// examples/exampletest). go list's Imports leaves out test files, so a
// package outside these that imports a test fixture is one the binary links.
func harness(p string) bool {
	return under("test")(p) || strings.HasSuffix(path.Base(p), "test") && path.Base(p) != "test"
}

func ours(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

// notStdlib reports whether imp is outside the standard library: its first
// element is a domain.
func notStdlib(imp string) bool { return strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") }

// dependencyRules are the arrows of DESIGN.md's package map. Each carries one
// made-up import that breaks it, so that TestRuleCatchesViolations can check the
// rule is not vacuous.
func dependencyRules() []rule {
	backends := under("store/badger", "store/etcd")
	return []rule{
		{name: "sdk/abi imports only the standard library",
			from: under("sdk/abi"), forbid: notStdlib,
			violation: [2]string{module + "/sdk/abi", "github.com/tetratelabs/wazero"}},
		{name: "test/testroot imports only the standard library",
			from: exactly("test/testroot"), forbid: notStdlib,
			violation: [2]string{module + "/test/testroot", module + "/host"}},
		{name: "store imports nothing of ours but sdk/abi",
			from: exactly("store"), forbid: func(imp string) bool { return ours(imp) && !under("sdk/abi")(imp) },
			violation: [2]string{module + "/store", module + "/engine"}},
		{name: "store backends never import the engine, host or cmd",
			from: under("store"), forbid: under("engine", "host", "cmd"),
			violation: [2]string{module + "/store/badger", module + "/host"}},
		{name: "the engine reaches the store through its contract only",
			from: under("engine"), forbid: func(imp string) bool { return backends(imp) || under("host", "cmd")(imp) },
			violation: [2]string{module + "/engine/controller", module + "/store/badger"}},
		{name: "the host never imports the engine or the store",
			from: under("host"), forbid: under("engine", "store", "cmd"),
			violation: [2]string{module + "/host", module + "/store"}},
		// host/bench is excluded: its widget package is plugin code, written
		// against the SDK as an author writes it, that the benchmark runs
		// natively as the baseline of the Wasm calls.
		{name: "the host imports only sdk/abi of the SDK",
			from:      func(p string) bool { return under("host")(p) && !under("host/bench")(p) },
			forbid:    func(imp string) bool { return under("sdk")(imp) && !under("sdk/abi")(imp) },
			violation: [2]string{module + "/host", module + "/sdk/plugin"}},
		{name: "the engine core does not import its API server",
			from: func(p string) bool { return under("engine")(p) && !under("engine/apiserver")(p) }, forbid: under("engine/apiserver"),
			violation: [2]string{module + "/engine/plugins", module + "/engine/apiserver/serving"}},
		{name: "the engine never imports its garbage collector",
			from: func(p string) bool { return under("engine")(p) && !under("engine/gc")(p) }, forbid: under("engine/gc"),
			violation: [2]string{module + "/engine", module + "/engine/gc"}},
		{name: "engine/kinds does not import the object service",
			from: under("engine/kinds"), forbid: exactly("engine"),
			violation: [2]string{module + "/engine/kinds", module + "/engine"}},
		{name: "engine/kinds does not import the API server",
			from: under("engine/kinds"), forbid: under("engine/apiserver"),
			violation: [2]string{module + "/engine/kinds", module + "/engine/apiserver"}},
		{name: "engine/kinds does not import the controller runtime",
			from: under("engine/kinds"), forbid: under("engine/controller"),
			violation: [2]string{module + "/engine/kinds/kindstest", module + "/engine/controller"}},
		{name: "engine/kinds does not import the plugin manager",
			from: under("engine/kinds"), forbid: under("engine/plugins"),
			violation: [2]string{module + "/engine/kinds", module + "/engine/plugins"}},
		{name: "only tests and test harnesses import test/testsupport and test/testserver",
			from: func(p string) bool { return !harness(p) }, forbid: exactly("test/testsupport", "test/testserver"),
			violation: [2]string{module + "/engine/apiserver", module + "/test/testsupport"}},
		{name: "nothing imports cmd",
			from: func(p string) bool { return !under("cmd")(p) }, forbid: under("cmd"),
			violation: [2]string{module + "/test/testserver", module + "/cmd/setpoint"}},
	}
}

// TestDependencyDirection enforces the arrows of DESIGN.md's package map on
// every package of the module; a rule that applies to no package fails, so a
// renamed package cannot make a rule pass by matching nothing.
func TestDependencyDirection(t *testing.T) {
	rules := dependencyRules()
	pkgs := listPackages(t)
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			applied := 0
			for _, p := range pkgs {
				if !r.from(p.ImportPath) {
					continue
				}
				applied++
				for _, imp := range p.Imports {
					if r.forbid(imp) {
						t.Errorf("%s imports %s", p.ImportPath, imp)
					}
				}
			}
			if applied == 0 {
				t.Errorf("the rule applies to no package of the module")
			}
		})
	}
}

// TestRuleCatchesViolations keeps the rules honest: each must reject a made-up
// import that breaks it.
func TestRuleCatchesViolations(t *testing.T) {
	for _, r := range dependencyRules() {
		from, imp := r.violation[0], r.violation[1]
		if !r.from(from) || !r.forbid(imp) {
			t.Errorf("rule %q lets %s import %s", r.name, from, imp)
		}
	}
	if !under("engine")(module + "/engine/apiserver") {
		t.Error("under(engine) misses engine/apiserver")
	}
	if under("store")(module + "/storex") {
		t.Error("under(store) matches storex")
	}
	if !exactly("store")(module+"/store") || exactly("store")(module+"/store/badger") {
		t.Error("exactly(store) is wrong")
	}
	if !harness(module+"/examples/exampletest") || !harness(module+"/test/bench/api") || harness(module+"/engine/apiserver") {
		t.Error("harness is wrong")
	}
}
