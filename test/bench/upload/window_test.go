package upload

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// widgetObject is a Widget as the engine hands it to the plugin.
const widgetObject = `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"widget-0001","namespace":"default","uid":"6f1c0a52-1b8e-4c1e-9d7a-3c2f9a1b0e11","resourceVersion":"12","generation":1,"creationTimestamp":"2026-01-02T03:04:05Z","labels":{"team":"platform"}},"spec":{"size":"medium","color":"blue"}}`

// BenchmarkInterpreterWindow loads the widget plugin's module on a host
// with the interpreter first and calls its reconcile on one instance
// without pause: while the interpreter serves, then, once the background
// compile switched it, compiled code for as long again (at least a
// second). The host has no object store, so the plugin's reads of its
// WidgetProvisions are denied and it answers with the error; the guest
// work up to there, decoding the Widget and encoding the request, is what
// a reconcile costs.
func BenchmarkInterpreterWindow(b *testing.B) {
	wasm, err := os.ReadFile(filepath.Join(testserver.ModuleRoot(b), "bin", "wasm", "widget-plugin.wasm"))
	if err != nil {
		b.Fatalf("%v (make plugins builds it)", err)
	}
	ctx := context.Background()
	req := &abi.ReconcileRequest{Object: abi.RawJSON(widgetObject)}
	for range b.N {
		h, err := host.New(host.Options{CacheDir: b.TempDir(), InterpreterFirst: true})
		if err != nil {
			b.Fatal(err)
		}
		before := benchtest.LoadAvg()
		start := time.Now()
		p, err := h.Load(ctx, "widget", wasm, host.Config{Limits: host.Limits{PoolSize: 1}})
		if err != nil {
			b.Fatal(err)
		}
		loaded := time.Since(start)
		if p.Tier() != host.TierInterpreter {
			b.Fatalf("tier after load = %s, want %s", p.Tier(), host.TierInterpreter)
		}
		call := func() {
			if _, err := p.Reconcile(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		interpreted, windowStart := 0, time.Now()
		for p.Tier() == host.TierInterpreter {
			call()
			interpreted++
		}
		window := time.Since(windowStart)
		if err := p.WaitCompiled(ctx); err != nil {
			b.Fatal(err)
		}
		compiled, compiledStart := 0, time.Now()
		for time.Since(compiledStart) < max(window, time.Second) {
			call()
			compiled++
		}
		compiledFor := time.Since(compiledStart)
		p.Close()
		h.Close()
		iRate := float64(interpreted) / window.Seconds()
		cRate := float64(compiled) / compiledFor.Seconds()
		b.Logf("widget plugin (%.1f MB): loaded on the interpreter in %v; %d reconciles in the %v on the interpreter, %.0f/s; compiled %.0f/s: the interpreter is %.0fx slower; load average %s, after %s",
			float64(len(wasm))/1e6, loaded.Round(time.Millisecond), interpreted, window.Round(time.Millisecond), iRate, cRate, cRate/iRate, before, benchtest.LoadAvg())
		b.ReportMetric(iRate, "interpreted-calls/s")
		b.ReportMetric(cRate, "compiled-calls/s")
		b.ReportMetric(window.Seconds()*1000, "window-ms")
	}
}
