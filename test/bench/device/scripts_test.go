package device

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestScriptsParse checks the scripts' shell syntax, and that they are
// executable (run.sh is the one command run on the machine).
func TestScriptsParse(t *testing.T) {
	for _, s := range []string{"run.sh", "bundle.sh"} {
		if fi, err := os.Stat(s); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s: want an executable file (%v)", s, err)
		}
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
}

// TestStepsNameBundledBenchmarks checks that every benchmark run.sh runs
// exists in its package and that bundle.sh builds that package's test
// binary, so that renaming a benchmark is caught here rather than on the
// machine.
func TestStepsNameBundledBenchmarks(t *testing.T) {
	run, err := os.ReadFile("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := os.ReadFile("bundle.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`BENCH_PKGS:-([a-z ]+)\}`).FindSubmatch(bundle)
	if m == nil {
		t.Fatal("bundle.sh: no default BENCH_PKGS")
	}
	built := strings.Fields(string(m[1]))
	steps := regexp.MustCompile(`(?m)^\s+step ([a-z]+) ([a-z]+) (Benchmark\w+) \d+ \d+`).FindAllSubmatch(run, -1)
	if len(steps) < 4 {
		t.Fatalf("run.sh: %d steps found, want at least 4", len(steps))
	}
	for _, s := range steps {
		name, pkg, bench := string(s[1]), string(s[2]), string(s[3])
		if !regexp.MustCompile(`(?m)^\s+` + name + `\)$`).Match(run) {
			t.Errorf("run.sh: step %s has no case in the STEPS loop", name)
		}
		if !slices.Contains(built, pkg) {
			t.Errorf("run.sh step %s runs test/bench/%s, which bundle.sh does not build (%v)", name, pkg, built)
		}
		files, err := filepath.Glob(filepath.Join("..", pkg, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("run.sh step %s: no test files in test/bench/%s", name, pkg)
			continue
		}
		declared := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			declared = declared || strings.Contains(string(b), "func "+bench+"(b *testing.B)")
		}
		if !declared {
			t.Errorf("run.sh step %s: test/bench/%s declares no %s", name, pkg, bench)
		}
	}
}
