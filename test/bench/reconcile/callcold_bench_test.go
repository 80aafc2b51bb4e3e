package reconcile

import (
	"context"
	"runtime"
	"testing"

	"github.com/setpoint-dev/setpoint/examples/widget/operator"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
)

// callKinds are the reconcile calls a Widget meets in a converge, in order:
// no child yet; the child observed for the first time (Ready, with a new
// lastProvisioned timestamp); and the steady state (callRequest).
func callKinds() []struct {
	name string
	req  *abi.ReconcileRequest
} {
	first := &abi.ReconcileRequest{Object: abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":` +
		`{"creationTimestamp":"2026-11-27T01:15:09Z","generation":1,"name":"w714","namespace":"default","resourceVersion":"739",` +
		`"uid":"0206aabe-2809-4072-a8e2-51768f45ed4c"},"spec":{"color":"gray","name":"Widget 714","size":"small"}}`)}
	child := abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"WidgetProvision","metadata":{"creationTimestamp":"2026-11-27T01:15:09Z",` +
		`"generation":1,"labels":{"example.setpoint.dev/widget":"w934"},"name":"w934","namespace":"default","ownerReferences":` +
		`[{"apiVersion":"example.setpoint.dev/v1","blockOwnerDeletion":true,"controller":true,"kind":"Widget","name":"w934",` +
		`"uid":"f9161e6f-8e69-4374-8403-6cc716abfcea"}],"resourceVersion":"3951","uid":"ce3d34f6-78ff-4dc6-a767-c6b8c54fc926"},` +
		`"spec":{"capacity":4,"size":"medium","widget":"Widget 934"}}`)
	provisioned := &abi.ReconcileRequest{
		Children: map[string][]abi.RawJSON{operator.ChildKey: {child}},
		Object: abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"creationTimestamp":"2026-11-27T01:15:09Z",` +
			`"generation":1,"name":"w934","namespace":"default","resourceVersion":"4005","uid":"f9161e6f-8e69-4374-8403-6cc716abfcea"},` +
			`"spec":{"color":"gray","name":"Widget 934","size":"medium"},"status":{"conditions":[{"lastTransitionTime":"2026-11-27T01:15:09Z",` +
			`"message":"reconciled","observedGeneration":1,"reason":"Reconciled","status":"True","type":"Ready"}],"observedGeneration":1,` +
			`"provision":"w934","state":"Provisioning"}}`),
	}
	return []struct {
		name string
		req  *abi.ReconcileRequest
	}{{"first", first}, {"provisioned", provisioned}, {"steady", callRequest()}}
}

// touchSink keeps the reads of touch from being optimized away.
var touchSink byte

// touch reads one byte of every cache line of mem, evicting from the CPU
// caches what the call before left there, as an engine's writes, store and
// garbage collector do between two reconcile calls of a converge.
func touch(mem []byte) {
	var s byte
	for i := 0; i < len(mem); i += 64 {
		s += mem[i]
	}
	touchSink += s
}

// BenchmarkReconcileCallCold is the CPU time of one reconcile call of each
// kind a converge makes (first, provisioned, steady), Wasm plugin and
// native, measured on the calling thread (the guest runs there), warm (the
// same call repeated) and cold (after reading SETPOINT_BENCH_TOUCH_MB, 16
// by default, of other memory). SETPOINT_BENCH_BACK calls run back to back
// after each touch (default 1): the cost per call of a batch of that many,
// which tells what serving several objects in one guest call could save.
// SETPOINT_BENCH_PLUGIN picks the module, as for BenchmarkReconcile.
// Thread CPU is read on Linux only; elsewhere the figures read 0.
func BenchmarkReconcileCallCold(b *testing.B) {
	var modes []mode
	for _, m := range onlyModes(b, reconcileModes(b)) {
		if m.name != "webhook" { // its server's threads would not be counted
			modes = append(modes, m)
		}
	}
	mb := benchtest.MustEnv(b, "SETPOINT_BENCH_TOUCH_MB", 16)
	back := max(benchtest.MustEnv(b, "SETPOINT_BENCH_BACK", 1), 1)
	for _, m := range modes {
		warm(b, m.r)
	}
	mem := make([]byte, mb<<20)
	for i := range mem {
		mem[i] = byte(i)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const calls = 300
	b.Logf("load %s, %d call(s) back to back, cold: after reading %d MB", benchtest.LoadAvg(), back, mb)
	b.ResetTimer()
	for range b.N {
		for _, k := range callKinds() {
			for _, m := range modes {
				for _, cold := range []bool{false, true} {
					xs := make([]float64, 0, calls)
					for range calls {
						if cold {
							touch(mem)
						}
						c0 := threadCPU()
						for range back {
							if _, err := m.r.Reconcile(context.Background(), k.req); err != nil {
								b.Fatal(err)
							}
						}
						xs = append(xs, float64(threadCPU()-c0)/1e3/float64(back))
					}
					name := "warm"
					if cold {
						name = "cold"
					}
					b.ReportMetric(median(xs), m.name+"-"+k.name+"-"+name+"-cpu-µs/call")
					b.Logf("%-12s %-7s %s: %6.1f µs of CPU/call (median of %d)", k.name, m.name, name, median(xs), calls)
				}
			}
		}
	}
}
