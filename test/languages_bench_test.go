package test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// BenchmarkWidgetPluginLanguages measures one reconcile call of a steady
// Widget (about 1 KiB, one matching WidgetProvision) under the real host for
// the Widget plugin in each language, and for the C plugin built without the
// sched_yield import (the same source and flags, with the one call that keeps
// the import removed from a copy of sdk/c/setpoint.h), which runs under the
// host's slow preemption path, alone and then timed call by call in
// alternation with the C plugin (x-c, the ratio of the two):
//
//	go test -run '^$' -bench WidgetPluginLanguages -benchtime 2000x ./test/
func BenchmarkWidgetPluginLanguages(b *testing.B) {
	dir, err := hosttest.Root()
	if err != nil {
		b.Fatal(err)
	}
	h := hosttest.NewHost(b, host.Options{})
	req := &abi.ReconcileRequest{
		Object: abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w1","namespace":"default",` +
			`"uid":"0b7c7b5e-1c1e-4d7f-9a57-2b1f0f1f2a3b","resourceVersion":"12345","generation":1,"creationTimestamp":"2026-01-01T00:00:00Z",` +
			`"labels":{"app":"demo","team":"platform","tier":"backend"},"annotations":{"note":"a widget of about one kilobyte, to measure one reconcile call"}},` +
			`"spec":{"name":"Widget 1","size":"medium","color":"gray"},"status":{"state":"Ready","provision":"w1","capacity":4,` +
			`"lastProvisioned":"2026-01-01T00:00:01Z","observedGeneration":1,"conditions":[{"type":"Ready","status":"True","reason":"Reconciled",` +
			`"message":"reconciled","observedGeneration":1,"lastTransitionTime":"2026-01-01T00:00:01Z"}]}}`),
		Children: map[string][]abi.RawJSON{"WidgetProvision.example.setpoint.dev": {abi.RawJSON(
			`{"apiVersion":"example.setpoint.dev/v1","kind":"WidgetProvision","metadata":{"name":"w1","namespace":"default",` +
				`"labels":{"example.setpoint.dev/widget":"w1"}},"spec":{"widget":"Widget 1","size":"medium","capacity":4}}`)}},
	}
	noYield := buildCWithoutYield(b, dir)
	load := func(b *testing.B, name string, wasm []byte) *host.Plugin {
		p, err := h.Load(context.Background(), name, wasm, host.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: preemption %s", name, p.Preemption())
		return p
	}
	call := func(b *testing.B, p *host.Plugin) {
		resp, err := p.Reconcile(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Contains(resp.Status, []byte(`"state":"Ready"`)) {
			b.Fatalf("status %s, want state Ready", resp.Status)
		}
	}
	for _, m := range []struct{ name, module string }{
		{"go", "widget-plugin"}, {"c", "widget-c"}, {"rust", "widget-rust"}, {"as", "widget-as"},
		{"c-without-sched_yield", ""},
	} {
		b.Run(m.name, func(b *testing.B) {
			wasm := noYield
			if m.module != "" {
				wasm = hosttest.Module(b, m.module)
			}
			p := load(b, m.name, wasm)
			b.ReportAllocs()
			for b.Loop() {
				call(b, p)
			}
		})
	}
	// The build without sched_yield, timed call by call against the C
	// plugin in alternation, so that a change in the machine's load
	// touches both alike; ns/op is its own cost, x-c the ratio of the two.
	b.Run("c-without-sched_yield-alternating", func(b *testing.B) {
		with, without := load(b, "c", hosttest.Module(b, "widget-c")), load(b, "c-without-sched_yield", noYield)
		var tWith, tWithout time.Duration
		for b.Loop() {
			t0 := time.Now()
			call(b, with)
			t1 := time.Now()
			call(b, without)
			tWith, tWithout = tWith+t1.Sub(t0), tWithout+time.Since(t1)
		}
		b.ReportMetric(float64(tWithout.Nanoseconds())/float64(b.N), "ns/op")
		b.ReportMetric(float64(tWithout)/float64(tWith), "x-c")
	})
}

// buildCWithoutYield builds plugins/widget-c with a copy of sdk/c/setpoint.h
// whose setpoint_alloc does not call sched_yield, so the module lacks the
// import, and checks that it does.
func buildCWithoutYield(b *testing.B, root string) []byte {
	b.Helper()
	if _, err := exec.LookPath("clang"); err != nil {
		b.Skip("clang not installed: run `make deps`")
	}
	header, err := os.ReadFile(filepath.Join(root, "sdk", "c", "setpoint.h"))
	if err != nil {
		b.Fatal(err)
	}
	const call = "setpoint_sched_yield();\n"
	if bytes.Count(header, []byte(call)) != 1 {
		b.Fatalf("sdk/c/setpoint.h: want one %q", call)
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "setpoint.h"), bytes.Replace(header, []byte(call), []byte("\n"), 1), 0o644); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, "widget-c.wasm")
	cmd := exec.Command("clang", "--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-s", "-I", dir,
		"-o", out, filepath.Join(root, "plugins", "widget-c", "widget.c"))
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("clang: %v\n%s", err, msg)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	if importsSchedYield(wasm) == nil {
		b.Fatal("the build without the call still imports sched_yield")
	}
	return wasm
}
