package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// TestWidgetPluginLanguages runs the Widget plugin written in each language
// the project ships a plugin in through the same end-to-end checks, on one
// server started with `--examples` (the Go Widget plugin installed): for
// each module in turn the widget Plugin is swapped to it, with
// spec.config log=true, and then its widgets converge (Ready,
// observedGeneration, status.capacity and a fresh lastProvisioned, one
// WidgetProvision owned by each with the widget's size, capacity, display
// name and label), a spec edit converges, a provision deleted by hand comes
// back, a deleted widget runs finalize (its Deprovisioned event names the
// capacity released) and its provision is collected, and the module's
// host-call path logs through the server. The C and Rust modules must
// import wasi_snapshot_preview1.sched_yield and get the host's own loop-head
// preemption, the fast path (docs/ABI.md).
func TestWidgetPluginLanguages(t *testing.T) {
	// Six widgets converge in seconds; the limit allows for a loaded machine.
	const langConvergeLimit = 2 * time.Minute
	buildGuests(t)
	langs := []struct {
		name   string // also the prefix of the widgets' names
		module string // under bin/wasm
		native bool   // native ABI: must import sched_yield
	}{
		{name: "go", module: "widget-plugin.wasm", native: true},
		{name: "c", module: "widget-c.wasm", native: true},
		{name: "rust", module: "widget-rust.wasm", native: true},
		{name: "as", module: "widget-as.wasm"},
	}
	modules := map[string][]byte{}
	for _, l := range langs {
		b, err := os.ReadFile(filepath.Join("..", "bin", "wasm", l.module))
		if err != nil {
			t.Fatalf("%v: .ci/build-wasm builds it when its toolchain is installed: run `make deps`", err)
		}
		modules[l.name] = b
	}

	s := testserver.Start(t, testserver.Options{Args: []string{"--examples", "--examples-dir", filepath.Join("..", "examples")}})
	a := &acceptance{t: t, s: s, c: s.HTTPClient()}
	a.c.Timeout = 2 * time.Minute
	t.Cleanup(a.c.CloseIdleConnections)
	a.pluginLoaded("widget", "")

	for _, l := range langs {
		t.Run(l.name, func(t *testing.T) {
			a.t = t
			wasm := modules[l.name]
			if l.native {
				if err := importsSchedYield(wasm); err != nil {
					t.Errorf("%s: %v: the host runs it under the slow preemption path", l.module, err)
				}
			}
			digest, err := a.swapWithConfig(wasm, `{"log":"true"}`)
			if err != nil {
				t.Fatal(err)
			}
			a.pluginLoaded("widget", digest)
			// The preemption the server's host gives it: its own loop
			// checks for a native module, wazero's close-on-context-done
			// for Extism (the status adds the reason of a fallback).
			preemption := "wazero"
			if l.native {
				preemption = "loop-checks"
			}
			if p, _ := a.get(accPlugins + "/widget"); p.Status.Preemption != preemption {
				t.Errorf("%s: status.preemption %q, want %q", l.module, p.Status.Preemption, preemption)
			}
			start := time.Now().Add(-time.Second).Truncate(time.Second)

			const n = 6
			if err := a.createWidgets(l.name, "lang-"+l.name, n, 0, nil); err != nil {
				t.Fatal(err)
			}
			a.eventually(l.name+" widgets converged", langConvergeLimit, func() string {
				return a.widgetsConverged(accPhaseLabel+"=lang-"+l.name, n)
			})
			for i := range n {
				if msg := a.langDetails(fmt.Sprintf("%s-%d", l.name, i), fmt.Sprintf("Widget %d", i), start); msg != "" {
					t.Error(msg)
				}
			}

			// A spec edit converges: small to large.
			w0 := l.name + "-0"
			a.must("PATCH", accWidgets+"/"+w0, "application/merge-patch+json", []byte(`{"spec":{"size":"large"}}`), 200)
			a.eventually("spec edit of "+w0+" converged", langConvergeLimit, func() string {
				w, _ := a.get(accWidgets + "/" + w0)
				c, _ := a.get(accProvisions + "/" + w0)
				if w.Status.Capacity != 16 || w.Status.ObservedGeneration != w.Metadata.Generation || c.Spec.Capacity != 16 || c.Spec.Size != "large" {
					return fmt.Sprintf("generation %d observed %d capacity %d, provision %s/%d", w.Metadata.Generation, w.Status.ObservedGeneration, w.Status.Capacity, c.Spec.Size, c.Spec.Capacity)
				}
				return ""
			})

			// A provision deleted by hand comes back.
			w1 := l.name + "-1"
			old, _ := a.get(accProvisions + "/" + w1)
			a.must("DELETE", accProvisions+"/"+w1, "", nil, 200, 202)
			a.eventually("provision "+w1+" recreated", langConvergeLimit, func() string {
				if c, ok := a.get(accProvisions + "/" + w1); !ok || c.Metadata.UID == old.Metadata.UID {
					return "not recreated"
				}
				return a.widgetsConverged(accPhaseLabel+"=lang-"+l.name, n)
			})

			// A deleted widget runs finalize; its provision is collected.
			w2 := l.name + "-2" // large: 16 units
			a.must("DELETE", accWidgets+"/"+w2, "", nil, 200, 202)
			a.eventually(w2+" and its provision gone", langConvergeLimit, func() string {
				if _, ok := a.get(accWidgets + "/" + w2); ok {
					return "widget still there"
				}
				if _, ok := a.get(accProvisions + "/" + w2); ok {
					return "provision still there"
				}
				return ""
			})
			want := "widget " + w2 + " released 16 capacity units"
			a.eventually("Deprovisioned event of "+w2, 30*time.Second, func() string {
				var events struct {
					Items []struct {
						Reason, Message string
						InvolvedObject  struct{ Name string } `json:"involvedObject"`
					}
				}
				if err := json.Unmarshal(a.must("GET", "/api/v1/namespaces/"+accNS+"/events", "", nil, 200), &events); err != nil {
					t.Fatal(err)
				}
				for _, e := range events.Items {
					if e.Reason == "Deprovisioned" && e.InvolvedObject.Name == w2 {
						if e.Message != want {
							return fmt.Sprintf("message %q, want %q", e.Message, want)
						}
						return ""
					}
				}
				return "none yet"
			})

			// The module logged through its host-call path (config log=true).
			a.eventually(l.name+" plugin log", 10*time.Second, func() string {
				for _, line := range strings.Split(s.Logs(), "\n") {
					if strings.Contains(line, "plugin log") && strings.Contains(line, "widget provisioned") &&
						strings.Contains(line, "name="+l.name+"-") {
						return ""
					}
				}
				return "no `plugin log` line with \"widget provisioned\" for a widget " + l.name + "-*"
			})
		})
	}
}

// swapWithConfig uploads wasm and points the widget Plugin at it with
// spec.config set to config (a JSON object).
func (a *acceptance) swapWithConfig(wasm []byte, config string) (string, error) {
	digest, err := a.swap(wasm)
	if err != nil {
		return "", err
	}
	code, b, err := a.do("PATCH", accPlugins+"/widget", "application/merge-patch+json", []byte(`{"spec":{"config":`+config+`}}`))
	if err == nil && code != 200 {
		err = fmt.Errorf("patch plugin config: %d %s", code, b)
	}
	return digest, err
}

// langDetails checks what widgetsConverged does not: the widget's
// status.provision and a lastProvisioned since start, and its provision's
// label, display name and namespace. It returns "" or what is wrong.
func (a *acceptance) langDetails(name, display string, start time.Time) string {
	var w struct {
		Status struct{ Provision, LastProvisioned string } `json:"status"`
	}
	var c struct {
		Metadata struct {
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct{ Widget string } `json:"spec"`
	}
	if err := json.Unmarshal(a.must("GET", accWidgets+"/"+name, "", nil, 200), &w); err != nil {
		return err.Error()
	}
	if err := json.Unmarshal(a.must("GET", accProvisions+"/"+name, "", nil, 200), &c); err != nil {
		return err.Error()
	}
	last, err := time.Parse(time.RFC3339, w.Status.LastProvisioned)
	switch {
	case w.Status.Provision != name:
		return fmt.Sprintf("%s: status.provision %q", name, w.Status.Provision)
	case err != nil || last.Before(start) || last.After(time.Now().Add(time.Minute)):
		return fmt.Sprintf("%s: status.lastProvisioned %q, want an RFC 3339 time since %s (%v)", name, w.Status.LastProvisioned, start.Format(time.RFC3339), err)
	case c.Metadata.Labels["example.setpoint.dev/widget"] != name || c.Spec.Widget != display || c.Metadata.Namespace != accNS:
		return fmt.Sprintf("%s: provision labels %v, spec.widget %q, namespace %q", name, c.Metadata.Labels, c.Spec.Widget, c.Metadata.Namespace)
	}
	return ""
}

// importsSchedYield reports whether the module imports
// wasi_snapshot_preview1.sched_yield as () -> i32.
func importsSchedYield(wasm []byte) error {
	ctx := context.Background()
	// Only the imports are read: the interpreter compiles a module in a
	// fraction of the compiler's time (the Go module under the race
	// detector: 1.5 s against 40 s).
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	m, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return err
	}
	for _, f := range m.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod == "wasi_snapshot_preview1" && name == "sched_yield" {
			if len(f.ParamTypes()) == 0 && len(f.ResultTypes()) == 1 && f.ResultTypes()[0] == api.ValueTypeI32 {
				return nil
			}
			return fmt.Errorf("sched_yield is imported as %v -> %v, not () -> i32", f.ParamTypes(), f.ResultTypes())
		}
	}
	return fmt.Errorf("no import of wasi_snapshot_preview1.sched_yield")
}

// TestLanguageHelpersHostCalls runs a small guest per language helper
// (test/testdata/hostcalls, built here with the real compilers) under the
// real host: its reconcile gets an object of about 10 KB through the `get`
// host function, longer than the helper's first response buffer, so the
// helper must fetch it with `result`; then it logs, and answers with the
// object's spec. A call without its config must fail with the guest's own
// message (the helper's failure packing).
func TestLanguageHelpersHostCalls(t *testing.T) {
	root, err := hosttest.Root()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "test", "testdata", "hostcalls")
	builds := []struct {
		name string
		cmd  func(out string) *exec.Cmd
	}{
		{"c", func(out string) *exec.Cmd {
			return exec.Command("clang", "--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-s", "-Wall", "-Werror",
				"-I", filepath.Join(root, "sdk", "c"), "-o", out, filepath.Join(src, "hostcalls.c"))
		}},
		{"rust", func(out string) *exec.Cmd {
			return exec.Command(rustc(), "--target", rustTarget(t), "--crate-type", "cdylib", "--edition", "2021",
				"-O", "-D", "warnings", "-o", out, filepath.Join(src, "hostcalls.rs"))
		}},
	}
	spec := `{"size":"large","data":"` + strings.Repeat("0123456789", 1000) + `"}`
	obj := `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"big","namespace":"default"},"spec":` + spec + `}`
	want := (&abi.GetResponse{Object: abi.RawJSON(obj), Found: true}).AppendJSON(nil)
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "hostcalls.wasm")
			if msg, err := b.cmd(out).CombinedOutput(); err != nil {
				t.Fatalf("build (make deps installs the toolchains): %v\n%s", err, msg)
			}
			wasm, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			reader := &oneObject{obj: obj}
			h := hosttest.NewHost(t, host.Options{Objects: reader})
			p, err := h.Load(context.Background(), "hostcalls-"+b.name, wasm, host.Config{Permissions: host.Permissions{Read: []string{"*"}}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range 2 { // the second call reuses the grown buffers
				resp, err := p.Reconcile(ctx, &abi.ReconcileRequest{Config: map[string]string{"get": "big"}, Object: abi.RawJSON(obj)})
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				var status struct {
					ResponseBytes int             `json:"responseBytes"`
					Spec          json.RawMessage `json:"spec"`
					LogError      string          `json:"logError"`
				}
				if err := json.Unmarshal(resp.Status, &status); err != nil {
					t.Fatalf("call %d: status %.200s: %v", i, resp.Status, err)
				}
				if status.ResponseBytes != len(want) || string(status.Spec) != spec || status.LogError != "" {
					t.Fatalf("call %d: response of %d bytes (want %d), spec of %d bytes equal: %v, log error %q",
						i, status.ResponseBytes, len(want), len(status.Spec), string(status.Spec) == spec, status.LogError)
				}
			}
			if got := reader.name; got != "big" {
				t.Errorf("the host was asked for %q, want big", got)
			}
			_, err = p.Reconcile(ctx, &abi.ReconcileRequest{Object: abi.RawJSON(obj)})
			if !errors.Is(err, host.ErrGuestPanic) || !strings.Contains(err.Error(), "config.get is not set") {
				t.Errorf("call without config: %v, want a guest failure saying config.get is not set", err)
			}
		})
	}
}

// oneObject serves one object to the get host function.
type oneObject struct {
	obj  string
	name string // the name last asked for
}

func (o *oneObject) GetObject(_ context.Context, _ string, req abi.GetRequest) ([]byte, bool, error) {
	o.name = req.Name
	return []byte(o.obj), req.Kind == "Widget" && req.Name == "big", nil
}

func (o *oneObject) ListObjects(context.Context, string, abi.ListRequest) ([][]byte, error) {
	return nil, nil
}

// rustc is the compiler .ci/build-wasm uses: $RUSTC, else Debian's.
func rustc() string {
	if r := os.Getenv("RUSTC"); r != "" {
		return r
	}
	return "/usr/bin/rustc"
}

// rustTarget is rustc's name for WASI preview 1.
func rustTarget(t *testing.T) string {
	out, err := exec.Command(rustc(), "--print", "target-list").Output()
	if err != nil {
		t.Fatalf("%s (make deps installs it): %v", rustc(), err)
	}
	if slices.Contains(strings.Fields(string(out)), "wasm32-wasip1") {
		return "wasm32-wasip1"
	}
	return "wasm32-wasi"
}
