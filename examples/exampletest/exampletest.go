// Package exampletest runs the walkthroughs of the examples' READMEs against
// a real server: each `sh` code block of a README section is a step, and a
// section's steps run as one bash script (so shell variables carry over)
// with the real setpoint and kubectl, the server's kubeconfig in KUBECONFIG,
// and the repository root as working directory. `bash` blocks are set-up a
// reader does (starting the server) that the test does itself.
package exampletest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// Sections returns the `sh` blocks of each "## " section of the Markdown
// file, by section title.
func Sections(t testing.TB, readme string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	var section string
	var block *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case block != nil && line == "```":
			out[section] = append(out[section], block.String())
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		case line == "```sh":
			block = &strings.Builder{}
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		}
	}
	return out
}

// Run starts a fresh server (with serverArgs) and runs the steps of a
// section as one script, failing t with the script's output when a step
// fails. It returns the script's output.
func Run(t *testing.T, steps []string, serverArgs ...string) string {
	t.Helper()
	if len(steps) == 0 {
		t.Fatal("exampletest: the section has no sh blocks")
	}
	if err := hosttest.Build(); err != nil { // the examples' modules
		t.Fatal(err)
	}
	s := testserver.Start(t, testserver.Options{Args: serverArgs})
	return RunOn(t, s, steps)
}

// RunOn runs the steps of a section as one script against the running
// server s, as Run does.
func RunOn(t *testing.T, s *testserver.Server, steps []string) string {
	t.Helper()
	root, err := hosttest.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testserver.Binary()
	if err != nil {
		t.Fatal(err)
	}
	// The binary may have another name ($SETPOINT_BIN): put it on PATH as
	// setpoint, as a reader's PATH has it.
	pathDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(pathDir, "setpoint")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// set -x prints each command before it runs, so a failure shows where.
	script := "set -euo pipefail -x\n" + strings.Join(steps, "\n")
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+s.Kubeconfig,
		"HOME="+t.TempDir(),
		"PATH="+pathDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"NO_COLOR=1",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough failed: %v\n%s", err, out)
	}
	return string(out)
}

// Want is a README section and strings its walkthrough must print.
type Want struct {
	Section string
	Output  []string
}

// Walkthrough runs each wanted section of readme as a subtest named after
// it, each against a fresh server (Run), and fails the subtest for every
// string of the section's Output that the walkthrough did not print.
func Walkthrough(t *testing.T, readme string, wants []Want) {
	sections := Sections(t, readme)
	for _, w := range wants {
		t.Run(w.Section, func(t *testing.T) {
			out := Run(t, sections[w.Section])
			for _, o := range w.Output {
				if !strings.Contains(out, o) {
					t.Errorf("output lacks %q:\n%s", o, out)
				}
			}
		})
	}
}
