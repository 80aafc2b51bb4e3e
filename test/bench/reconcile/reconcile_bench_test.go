// Package reconcile measures, in one run, how fast objects reach Ready
// through the reconcile engine with the same Widget logic
// (examples/widget/operator) behind three Reconcilers: the built Wasm plugin
// (bin/wasm/widget-plugin.wasm) on the real host, native Go in the engine's
// process, and a Metacontroller-style JSON webhook on loopback. Each mode
// gets a fresh Badger store and engine, the objects are created before the
// clock starts, and the clock stops when the last one is Ready with its
// WidgetProvision observed. Ratios are against the native run of the same
// process, since the machines are noisy.
//
//	make bench-reconcile
//	go test -run '^$' -bench . -benchtime 1x -v ./test/bench/reconcile
//
// SETPOINT_BENCH_OBJECTS changes the 10,000 objects per mode and
// SETPOINT_BENCH_ROUNDS the 3 rounds (the median round of each mode counts).
// SETPOINT_BENCH_MODES keeps some of the modes (wasm, native, webhook), for
// a profile; the ratios need wasm and native, or wasm and webhook.
// SETPOINT_BENCH_WORKERS is the controller's worker counts to measure, as a
// comma-separated list (default: what the server gives a plugin,
// plugins.DefaultWorkers): with several, each is measured in turn
// and a table of objects/s by worker count ends the output, which shows on
// a machine with many cores how convergence scales. SETPOINT_BENCH_POOL
// sets the Wasm plugin's instances (default: the host's, one per core), to
// tell the wait for an instance from the cost of a call, and
// SETPOINT_BENCH_PLUGIN the module under bin/wasm (default
// widget-plugin.wasm, the Go guest; widget-rust.wasm and widget-c.wasm run
// the same logic), to tell the host's share from the guest's. Each round's
// line says the reconcile calls per object, which differ between modes only
// when one needs more (retries). GOMAXPROCS sets the cores the process uses,
// as for any Go program. BenchmarkReconcileCallCold prices each kind of call
// warm and on cold caches (SETPOINT_BENCH_TOUCH_MB, SETPOINT_BENCH_BACK).
package reconcile

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/plugins"
	"github.com/setpoint-dev/setpoint/examples/widget/operator"
	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

var (
	widgets    = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}
	provisions = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgetprovisions"}
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEngine starts the engine's object service on a fresh Badger store with
// the example's Widget and WidgetProvision kinds.
func newEngine(b *testing.B) *engine.Service {
	db, err := badger.Open(b.TempDir(), badger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := engine.New(context.Background(), engine.Options{Store: db, Logger: quiet()})
	if err != nil {
		db.Close()
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done; s.Close(); db.Close() })
	for _, f := range []string{"crd.yaml", "provision-crd.yaml"} {
		raw, err := os.ReadFile(filepath.Join(testserver.ModuleRoot(b), "examples", "widget", f))
		if err != nil {
			b.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Create(ctx, kinds.CRDResource, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	testsupport.Eventually(b, time.Minute, "the example kinds served", func() bool {
		_, w := s.Resource(widgets)
		_, p := s.Resource(provisions)
		return w && p
	})
	return s
}

// counted counts the reconcile calls of a converge: the work per object
// differs between modes when one needs more calls (retries on conflicts).
type counted struct {
	r controller.Reconciler
	n atomic.Int64
}

func (c *counted) Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	c.n.Add(1)
	return c.r.Reconcile(ctx, req)
}

// native runs the operator in the engine's process.
type native struct{ op *operator.Operator }

func (n native) Reconcile(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return n.op.Reconcile(&plugintest.Host{}, req)
}

// Metacontroller-style webhook documents: the parent and its children by
// kind in, the status and the desired children out, as JSON over HTTP.
type hookRequest struct {
	Parent   json.RawMessage              `json:"parent"`
	Children map[string][]json.RawMessage `json:"children"`
	Attempt  int                          `json:"attempt"`
}

type hookResponse struct {
	Status   json.RawMessage   `json:"status,omitempty"`
	Children []json.RawMessage `json:"children"`
	Error    string            `json:"error,omitempty"`
	Terminal bool              `json:"terminal,omitempty"`
}

// webhookServer serves the operator at POST /sync on a loopback port.
func webhookServer(b *testing.B, op *operator.Operator) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in hookRequest
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := &abi.ReconcileRequest{Object: abi.RawJSON(in.Parent), Attempt: in.Attempt, Children: map[string][]abi.RawJSON{}}
		for k, l := range in.Children {
			for _, c := range l {
				req.Children[k] = append(req.Children[k], abi.RawJSON(c))
			}
		}
		var out hookResponse
		resp, err := op.Reconcile(&plugintest.Host{}, req)
		if err != nil {
			out.Error, out.Terminal = err.Error(), errors.Is(err, errTerminal)
		} else {
			out.Status = json.RawMessage(resp.Status)
			for _, c := range resp.Children {
				out.Children = append(out.Children, json.RawMessage(c))
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/sync"
}

var errTerminal = errors.New("terminal")

// webhook is the engine side of the webhook: a Reconciler that posts each
// request and decodes the answer, over kept-alive connections.
type webhook struct {
	url string
	c   *http.Client
}

func (h webhook) Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	in := hookRequest{Parent: json.RawMessage(req.Object), Attempt: req.Attempt, Children: map[string][]json.RawMessage{}}
	for k, l := range req.Children {
		for _, c := range l {
			in.Children[k] = append(in.Children[k], json.RawMessage(c))
		}
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := h.c.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("webhook: %s: %s", resp.Status, msg)
	}
	var out hookResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	r := &abi.ReconcileResponse{Status: abi.RawJSON(out.Status), Error: out.Error, Terminal: out.Terminal}
	for _, c := range out.Children {
		r.Children = append(r.Children, abi.RawJSON(c))
	}
	return r, nil
}

// warm calls r from several goroutines before the clock starts, so that
// instance pools and connections exist in every mode.
func warm(b *testing.B, r controller.Reconciler) {
	req := &abi.ReconcileRequest{Object: abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget",` +
		`"metadata":{"name":"warm","namespace":"default"},"spec":{"name":"Warm","size":"small"}}`)}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if _, err := r.Reconcile(context.Background(), req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// converge creates n widgets, then starts a controller with r and returns
// the time until every widget reports state Ready with a Ready condition,
// the CPU time the process spent meanwhile (ns) and the reconcile calls
// made.
func converge(b *testing.B, n, workers int, r controller.Reconciler) (took time.Duration, cpu, calls int64) {
	s := newEngine(b)
	ctx := context.Background()
	sizes := []string{"small", "medium", "large"}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
					"metadata": map[string]any{"name": "w" + strconv.Itoa(i), "namespace": "default"},
					"spec":     map[string]any{"name": "Widget " + strconv.Itoa(i), "size": sizes[i%3]},
				}}
				if _, err := s.Create(ctx, widgets, u, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	warm(b, r)
	ready := make(map[string]bool, n)
	w, rv := readyWatch(b, s, ready, "")
	defer func() { w.Stop() }()
	counter := &counted{r: r}
	ctl, err := controller.New(controller.Options{
		Name: "widget", Client: s, Reconciler: counter, Logger: quiet(), Workers: workers,
		For:  controller.Kind{Resource: widgets, Kind: "Widget", Namespaced: true},
		Owns: []controller.Kind{{Resource: provisions, Kind: "WidgetProvision", Namespaced: true}},
	})
	if err != nil {
		b.Fatal(err)
	}
	m := controller.NewManager(controller.ManagerOptions{Logger: quiet()})
	m.Put(ctl)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start, cpu0 := time.Now(), processCPU()
	go func() { done <- m.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	timeout := time.After(20 * time.Minute)
	for len(ready) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				// Cut off for falling behind (the process is busy
				// converging): resume where it ended, or from a new
				// list after an error (the revision may be gone).
				if ev.Type == watch.Error {
					rv = ""
				}
				w.Stop()
				w, rv = readyWatch(b, s, ready, rv)
				continue
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			if ev.Type == watch.Modified && isReady(u) {
				ready[u.GetName()] = true
			}
		case <-timeout:
			b.Fatalf("%d of %d Ready after 20 minutes", len(ready), n)
		}
	}
	return time.Since(start), processCPU() - cpu0, counter.n.Load()
}

// readyWatch watches the widgets from rv, or from a list that records
// which are Ready in ready when rv is "" or has expired; it returns the
// watch and the resourceVersion it starts from.
func readyWatch(b *testing.B, s *engine.Service, ready map[string]bool, rv string) (watch.Interface, string) {
	ctx := context.Background()
	if rv != "" {
		if w, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}); err == nil {
			return w, rv
		}
	}
	list, err := s.List(ctx, widgets, "default", metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range list.Items {
		if isReady(&list.Items[i]) {
			ready[list.Items[i].GetName()] = true
		}
	}
	w, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), AllowWatchBookmarks: true})
	if err != nil {
		b.Fatal(err)
	}
	return w, list.GetResourceVersion()
}

func isReady(u *unstructured.Unstructured) bool {
	if st, _, _ := unstructured.NestedString(u.Object, "status", "state"); st != operator.StateReady {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// callRequest is a reconcile request of a Ready widget with its child: the
// steady-state call.
func callRequest() *abi.ReconcileRequest {
	child := abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"WidgetProvision","metadata":{"name":"w1","namespace":"default"},` +
		`"spec":{"widget":"Widget 1","size":"medium","capacity":4}}`)
	return &abi.ReconcileRequest{
		Object: abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w1","namespace":"default",` +
			`"uid":"0b6f3c9e-5d6c-4f0a-9a53-0e6f0f4d1a11","generation":1,"resourceVersion":"42","creationTimestamp":"2026-11-21T04:00:00Z"},` +
			`"spec":{"name":"Widget 1","size":"medium"},"status":{"state":"Ready","provision":"w1","capacity":4,` +
			`"lastProvisioned":"2026-11-21T04:00:01Z","observedGeneration":1}}`),
		Children: map[string][]abi.RawJSON{operator.ChildKey: {child}},
	}
}

// mode is one way of running the widget operator's reconcile logic.
type mode struct {
	name string
	r    controller.Reconciler
}

// reconcileModes loads the widget plugin and returns the three modes in the
// order the figures use (wasm, native, webhook); cleanups release them
// when b ends.
func reconcileModes(b *testing.B) []mode {
	module := cmp.Or(os.Getenv("SETPOINT_BENCH_PLUGIN"), "widget-plugin.wasm")
	wasm, err := os.ReadFile(filepath.Join(testserver.ModuleRoot(b), "bin", "wasm", module))
	if err != nil {
		b.Fatalf("%v (run `make plugins`)", err)
	}
	h, err := host.New(host.Options{CacheDir: filepath.Join(testserver.ModuleRoot(b), "bin", "wasm-cache"), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	p, err := h.Load(context.Background(), "widget", wasm, host.Config{Limits: host.Limits{PoolSize: benchtest.MustEnv(b, "SETPOINT_BENCH_POOL", 0)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	op := &operator.Operator{}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(hc.CloseIdleConnections)
	return []mode{{"wasm", p}, {"native", native{op}}, {"webhook", webhook{url: webhookServer(b, op), c: hc}}}
}

// BenchmarkReconcileCall is the cost of one reconcile call of the same
// logic in each mode, without the engine: what a converge pays per call.
// The modes run in interleaved rounds so that a shared machine's noise
// spreads over all of them; each figure is the median round, in wall time
// and in the process's CPU time (every thread: guest, host, the webhook's
// client and server, the garbage collector), which load disturbs less.
func BenchmarkReconcileCall(b *testing.B) {
	modes := reconcileModes(b)
	for _, m := range modes {
		warm(b, m.r)
	}
	req := callRequest()
	const rounds, calls = 9, 400
	wall := make([][]float64, len(modes))
	cpu := make([][]float64, len(modes))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for range rounds {
			for i, m := range modes {
				runtime.GC()
				c0, t0 := processCPU(), time.Now()
				for range calls {
					if _, err := m.r.Reconcile(context.Background(), req); err != nil {
						b.Fatal(err)
					}
				}
				wall[i] = append(wall[i], float64(time.Since(t0).Nanoseconds())/1e3/calls)
				cpu[i] = append(cpu[i], float64(processCPU()-c0)/1e3/calls)
			}
		}
	}
	b.StopTimer()
	med := make([]float64, len(modes))
	for i, m := range modes {
		med[i] = median(cpu[i])
		b.ReportMetric(median(wall[i]), m.name+"-µs/call")
		b.ReportMetric(med[i], m.name+"-cpu-µs/call")
		b.Logf("%-8s %7.1f µs/call, %7.1f µs of CPU/call (medians of %d rounds)", m.name, median(wall[i]), med[i], len(cpu[i]))
	}
	b.Logf("CPU per call: wasm / native %.1fx, webhook / wasm %.2fx", med[0]/med[1], med[2]/med[0])
}

// median is the median of xs, or NaN for none (a mode left out).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// workerCounts reads SETPOINT_BENCH_WORKERS: the worker counts to measure.
func workerCounts(b *testing.B) []int {
	v := os.Getenv("SETPOINT_BENCH_WORKERS")
	if v == "" {
		return []int{plugins.DefaultWorkers()}
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("SETPOINT_BENCH_WORKERS=%q: want positive worker counts separated by commas", v)
		}
		out = append(out, n)
	}
	return out
}

// onlyModes keeps the modes SETPOINT_BENCH_MODES names (comma-separated;
// default all), for a profile of one mode.
func onlyModes(b *testing.B, modes []mode) []mode {
	v := os.Getenv("SETPOINT_BENCH_MODES")
	if v == "" {
		return modes
	}
	var out []mode
	for _, m := range modes {
		if slices.Contains(strings.Split(v, ","), m.name) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		b.Fatalf("SETPOINT_BENCH_MODES=%q names none of wasm, native, webhook", v)
	}
	return out
}

// BenchmarkReconcile runs the three modes one after the other, at each
// worker count, and reports the time to Ready, objects per second and the
// ratios.
func BenchmarkReconcile(b *testing.B) {
	n := benchtest.MustEnv(b, "SETPOINT_BENCH_OBJECTS", 10000)
	modes := onlyModes(b, reconcileModes(b))
	rounds := benchtest.MustEnv(b, "SETPOINT_BENCH_ROUNDS", 3)
	counts := workerCounts(b)
	b.Logf("GOMAXPROCS %d, %d objects per mode, %d rounds, workers %v, load %s", runtime.GOMAXPROCS(0), n, rounds, counts, benchtest.LoadAvg())
	for range b.N {
		rates := make([]map[string]float64, len(counts))
		for wi, workers := range counts {
			rates[wi] = convergeModes(b, modes, n, rounds, workers, len(counts) > 1)
		}
		if len(counts) > 1 {
			b.Logf("objects/s by workers (GOMAXPROCS %d):", runtime.GOMAXPROCS(0))
			b.Logf("%8s %9s %9s %9s %12s", "workers", "wasm", "native", "webhook", "wasm/native")
			for wi, workers := range counts {
				r := rates[wi]
				b.Logf("%8d %9.0f %9.0f %9.0f %11.2fx", workers, r["wasm"], r["native"], r["webhook"], r["wasm"]/r["native"])
			}
		}
	}
	if strings.Contains(os.Getenv("GOFLAGS"), "-race") {
		b.Log("note: built with -race; figures are not representative")
	}
}

// convergeModes converges n objects in every mode, rounds times, with the
// given workers, logs and reports the figures (their names carry the worker
// count when suffix is set) and returns each mode's median objects/s.
func convergeModes(b *testing.B, modes []mode, n, rounds, workers int, suffix bool) map[string]float64 {
	metric := func(name string) string {
		if suffix {
			return name + "@w" + strconv.Itoa(workers)
		}
		return name
	}
	// Each round runs every mode, in an order rotated per round; the
	// median round of each mode is reported, since one slow round (a
	// neighbour's burst of disk or CPU) would otherwise decide. CPU time
	// per object is reported too: a neighbour's load moves it far less
	// than the time to Ready.
	took := map[string][]float64{} // seconds to Ready
	cpu := map[string][]float64{}
	for round := range rounds {
		for i := range modes {
			m := modes[(i+round)%len(modes)]
			d, c, calls := converge(b, n, workers, m.r)
			took[m.name] = append(took[m.name], d.Seconds())
			cpu[m.name] = append(cpu[m.name], float64(c)/1e3/float64(n))
			b.Logf("workers %d round %d  %-8s %6d objects Ready in %8s  %8.0f objects/s  %6.0f µs of CPU/object  %.2f calls/object", workers, round+1, m.name, n,
				d.Round(time.Millisecond), float64(n)/d.Seconds(), float64(c)/1e3/float64(n), float64(calls)/float64(n))
		}
	}
	for _, m := range modes {
		b.ReportMetric(median(cpu[m.name]), metric(m.name+"-cpu-µs/obj"))
	}
	b.Logf("workers %d CPU per object (medians): wasm %.0f µs, native %.0f µs, webhook %.0f µs; webhook / wasm %.2fx", workers,
		median(cpu["wasm"]), median(cpu["native"]), median(cpu["webhook"]), median(cpu["webhook"])/median(cpu["wasm"]))
	rates := map[string]float64{"wasm": math.NaN(), "native": math.NaN(), "webhook": math.NaN()}
	for _, m := range modes {
		rates[m.name] = float64(n) / median(took[m.name])
		b.Logf("workers %d median   %-8s %8.0f objects/s", workers, m.name, rates[m.name])
		b.ReportMetric(rates[m.name], metric(m.name+"-obj/s"))
	}
	b.Logf("workers %d wasm/native %.2fx (goal >= 0.9x), wasm/webhook %.2fx (goal >= 2x)", workers,
		rates["wasm"]/rates["native"], rates["wasm"]/rates["webhook"])
	b.ReportMetric(rates["wasm"]/rates["native"], metric("wasm/native"))
	b.ReportMetric(rates["wasm"]/rates["webhook"], metric("wasm/webhook"))
	return rates
}
