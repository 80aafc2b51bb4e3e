// Package hostile measures, against the built server (`make
// bench-hostile`), how far a misbehaving plugin slows the others: the
// widget plugin converges N Widgets while a client times GETs of an
// unrelated object, first alone, then with a hostile Plugin
// (host/testdata/guests/faulty) bound to another kind whose objects are
// updated without pause, so that it is called constantly. Each hostile mode
// makes every reconcile call fail its own way:
//
//   - spin: loop until the call timeout stops it (1s, the default);
//   - trap: read outside linear memory, a Wasm trap at once;
//   - grow: allocate until the memory cap (spec.limits.memoryPages) stops it;
//   - spin, poolSize 1: the spinner held to one instance, so to one core;
//   - spin, poolSize 1 and callTimeout 100ms: the same, stopped sooner.
//
// The phase updates-only updates the hostile kind's objects as the hostile
// phases do, with no Plugin bound to them: what the client's updates cost
// the server without any plugin, a second baseline.
//
// Each phase runs on a fresh server. The figures are Widgets Ready per
// second from the widget Plugin's creation until the last is Ready, the
// ratio to the phase alone (goal >= 0.90), and the GET p99 alone and with
// (goal <= 2x), with the machine's cores and load average.
//
//	make bench-hostile
//	go test -run '^$' -bench . -benchtime 1x -v ./test/bench/hostile
//
// SETPOINT_BENCH_OBJECTS changes the 500 Widgets per phase,
// SETPOINT_BENCH_HOSTILE_OBJECTS the 16 objects of the hostile kind and
// SETPOINT_BENCH_HOSTILE_WARMUP the 2 seconds the hostile plugin runs
// before the clock starts (longer measures a plugin that has been failing
// for a while, after the server suspended its calls).
// SETPOINT_BENCH_PROFILE=DIR saves a CPU profile of the server over the
// first 3 seconds of each phase's clock to DIR/PHASE.pprof (the server's
// /debug/pprof), for `go tool pprof`. SETPOINT_BENCH_SERVER_ARGS adds
// flags (space-separated) to every phase's server, e.g.
// "--plugin-write-rate 100000 --plugin-write-burst 100000" so that long
// phases are not paced by the widget plugin's write limit.
package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

const (
	modulePath  = "/apis/setpoint.dev/v1alpha1/modules"
	pluginsPath = "/apis/setpoint.dev/v1alpha1/plugins"
	crdPath     = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	widgetsPath = "/apis/example.setpoint.dev/v1/namespaces/default/widgets"
	gadgetsPath = "/apis/hostile.setpoint.dev/v1/namespaces/default/gadgets"
	probePath   = "/api/v1/namespaces/default"
)

// gadgetCRD is the hostile plugin's kind.
var gadgetCRD = testsupport.CRD{Group: "hostile.setpoint.dev", Kind: "Gadget", Status: true,
	Schema: `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`}.String()

// phase is one run: the hostile Plugin's mode and limits, none when alone.
type phase struct {
	name   string
	mode   string // the faulty guest's config mode; "" for no hostile plugin
	limits string // the hostile Plugin's spec.limits, JSON
	// updatesOnly: the hostile kind's objects are updated as in the hostile
	// phases, but no Plugin reconciles them: what the updates alone cost.
	updatesOnly bool
}

var phases = []phase{
	{name: "alone"},
	{name: "updates-only", updatesOnly: true},
	{name: "spin", mode: "loop", limits: `{}`},
	{name: "trap", mode: "trap", limits: `{}`},
	{name: "grow", mode: "alloc", limits: `{"memoryPages":512}`},
	{name: "spin-pool1", mode: "loop", limits: `{"poolSize":1}`},
	{name: "spin-pool1-100ms", mode: "loop", limits: `{"poolSize":1,"callTimeout":"100ms"}`},
}

type env struct {
	b *testing.B
	s *testserver.Server
	c *http.Client
}

// do sends body and fails the benchmark unless the answer is one of want.
func (e env) do(method, path, contentType string, body []byte, want ...int) []byte {
	e.b.Helper()
	code, out, err := e.try(method, path, contentType, body)
	if err != nil {
		e.b.Fatalf("%s %s: %v", method, path, err)
	}
	if !slices.Contains(want, code) {
		e.b.Fatalf("%s %s: %d %s", method, path, code, out)
	}
	return out
}

func (e env) try(method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, e.s.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+e.s.Token)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, err = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes(), err
}

// served waits until path answers 200.
func (e env) served(path string) {
	e.b.Helper()
	testsupport.Poll(e.b, 30*time.Second, path+" served", func() (bool, string) {
		code, body, err := e.try(http.MethodGet, path, "", nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %s %v", code, body, err)
	})
}

func (e env) upload(name string) string {
	e.b.Helper()
	wasm, err := os.ReadFile(filepath.Join(testserver.ModuleRoot(e.b), "bin", "wasm", name))
	if err != nil {
		e.b.Fatalf("%v (make plugins builds it)", err)
	}
	resp := e.do(http.MethodPost, modulePath, "application/wasm", wasm, http.StatusOK, http.StatusCreated)
	var m struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal(resp, &m); err != nil || !strings.HasPrefix(m.Digest, "sha256:") {
		e.b.Fatalf("upload of %s answered %s (%v)", name, resp, err)
	}
	return m.Digest
}

// waitPluginReady waits until the Plugin name reports Ready True.
func (e env) waitPluginReady(name string) {
	e.b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var p struct {
			Status struct {
				Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
			} `json:"status"`
		}
		body := e.do(http.MethodGet, pluginsPath+"/"+name, "", nil, http.StatusOK)
		if err := json.Unmarshal(body, &p); err != nil {
			e.b.Fatal(err)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				return
			}
		}
		if time.Now().After(deadline) {
			e.b.Fatalf("plugin %s not Ready after 60 s: %s", name, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// createAll creates n objects from make(i) over 8 connections.
func (e env) createAll(path string, n int, mk func(i int) string) {
	e.b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				code, out, err := e.try(http.MethodPost, path, "application/json", []byte(mk(i)))
				if err == nil && code != http.StatusCreated {
					err = fmt.Errorf("%d %s", code, out)
				}
				if err != nil {
					errs <- fmt.Errorf("POST %s: %w", path, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		e.b.Fatal(err)
	}
}

// result is one phase's figures.
type result struct {
	took     time.Duration
	p99, p50 time.Duration
	gets     int
	churn    int // updates of the hostile objects during the phase
	hostile  string
}

// run starts a fresh server and measures one phase.
func run(b *testing.B, ph phase, n, m int, warmup time.Duration) result {
	s := testserver.Start(b, testserver.Options{LogLevel: "error", Args: strings.Fields(os.Getenv("SETPOINT_BENCH_SERVER_ARGS"))})
	c := s.HTTPClient()
	b.Cleanup(c.CloseIdleConnections)
	e := env{b: b, s: s, c: c}
	for _, f := range []string{"crd.yaml", "provision-crd.yaml"} {
		stdout, stderr, err := s.Kubectl("apply", "-f", filepath.Join(testserver.ModuleRoot(b), "examples", "widget", f))
		if err != nil {
			b.Fatalf("kubectl apply %s: %v\n%s%s", f, err, stdout, stderr)
		}
	}
	e.served(widgetsPath)
	e.served(probePath)
	widgetDigest := e.upload("widget-plugin.wasm")
	e.createAll(widgetsPath, n, func(i int) string {
		return fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w%d"},"spec":{"name":"Widget %d","size":%q}}`,
			i, i, []string{"small", "medium", "large"}[i%3])
	})

	stop := make(chan struct{})
	var bg sync.WaitGroup
	var churn int
	if ph.mode != "" || ph.updatesOnly {
		e.do(http.MethodPost, crdPath, "application/json", []byte(gadgetCRD), http.StatusCreated)
		e.served(gadgetsPath)
		e.createAll(gadgetsPath, m, func(i int) string {
			return fmt.Sprintf(`{"apiVersion":"hostile.setpoint.dev/v1","kind":"Gadget","metadata":{"name":"g%d"},"spec":{"n":0}}`, i)
		})
		if !ph.updatesOnly {
			digest := e.upload("faulty.wasm")
			e.do(http.MethodPost, pluginsPath, "application/json", fmt.Appendf(nil,
				`{"apiVersion":"setpoint.dev/v1alpha1","kind":"Plugin","metadata":{"name":"hostile"},
"spec":{"module":{"digest":%q},"reconcile":{"for":"gadgets.hostile.setpoint.dev"},"config":{"mode":%q},"limits":%s}}`,
				digest, ph.mode, ph.limits), http.StatusCreated)
		}
		// Every hostile object is updated in turn without pause, so each
		// one's reconcile is queued again as soon as it is done.
		bg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code, out, err := e.try(http.MethodPatch, fmt.Sprintf("%s/g%d", gadgetsPath, i%m), "application/merge-patch+json",
					fmt.Appendf(nil, `{"spec":{"n":%d}}`, i))
				if err != nil || code != http.StatusOK {
					b.Errorf("update of a hostile object: %d %s %v", code, out, err)
					return
				}
				churn++
			}
		})
		time.Sleep(warmup) // the hostile plugin is loaded and failing before the clock starts
	}

	// The probe: GETs of an unrelated object, one after another.
	var lat []time.Duration
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			code, out, err := e.try(http.MethodGet, probePath, "", nil)
			if err != nil || code != http.StatusOK {
				b.Errorf("GET %s: %d %s %v", probePath, code, out, err)
				return
			}
			lat = append(lat, time.Since(t0))
			time.Sleep(5 * time.Millisecond)
		}
	})

	if dir := os.Getenv("SETPOINT_BENCH_PROFILE"); dir != "" {
		bg.Go(func() { e.profile(filepath.Join(dir, ph.name+".pprof")) })
	}
	start := time.Now()
	e.do(http.MethodPost, pluginsPath, "application/json", fmt.Appendf(nil,
		`{"apiVersion":"setpoint.dev/v1alpha1","kind":"Plugin","metadata":{"name":"widget"},
"spec":{"module":{"digest":%q},"reconcile":{"for":"widgets.example.setpoint.dev","owns":["widgetprovisions.example.setpoint.dev"]}}}`,
		widgetDigest), http.StatusCreated)
	waitAllReady(e, n)
	took := time.Since(start)
	close(stop)
	bg.Wait()
	r := result{took: took, gets: len(lat), churn: churn}
	if ph.mode != "" {
		r.hostile = hostileState(e)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	s.Stop()
	return r
}

// profile saves a 3-second CPU profile of the server to path.
func (e env) profile(path string) {
	code, out, err := e.try(http.MethodGet, "/debug/pprof/profile?seconds=3", "", nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("%d %s", code, out)
	}
	if err == nil {
		err = os.WriteFile(path, out, 0o644)
	}
	if err != nil {
		e.b.Errorf("CPU profile: %v", err)
	}
}

// waitAllReady polls the Widgets until all n report state Ready (a poll
// every 100 ms; the clock is that much coarse at worst).
func waitAllReady(e env, n int) {
	e.b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var l struct {
			Items []struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"items"`
		}
		body := e.do(http.MethodGet, widgetsPath, "", nil, http.StatusOK)
		if err := json.Unmarshal(body, &l); err != nil {
			e.b.Fatal(err)
		}
		ready := 0
		for _, it := range l.Items {
			if it.Status.State == "Ready" {
				ready++
			}
		}
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			e.b.Fatalf("%d of %d Widgets Ready after 10 minutes", ready, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// hostileState is the hostile Plugin's call counts from /metrics and its
// conditions, to show that it was called and failed as meant.
func hostileState(e env) string {
	body := e.do(http.MethodGet, pluginsPath+"/hostile", "", nil, http.StatusOK)
	var p struct {
		Status struct {
			Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return string(body)
	}
	var parts []string
	for l := range strings.Lines(string(e.do(http.MethodGet, "/metrics", "", nil, http.StatusOK))) {
		if strings.HasPrefix(l, "setpoint_plugin_call") && strings.Contains(l, `plugin="hostile"`) {
			parts = append(parts, strings.TrimSpace(l))
		}
	}
	for _, c := range p.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s %s %s", c.Type, c.Status, c.Reason, clip(c.Message, 120)))
	}
	return strings.Join(parts, "; ")
}

func BenchmarkHostilePlugins(b *testing.B) {
	n := benchtest.MustEnv(b, "SETPOINT_BENCH_OBJECTS", 500)
	m := benchtest.MustEnv(b, "SETPOINT_BENCH_HOSTILE_OBJECTS", 16)
	warmup := time.Duration(benchtest.MustEnv(b, "SETPOINT_BENCH_HOSTILE_WARMUP", 2)) * time.Second
	for range b.N {
		b.Logf("machine: %d cores (GOMAXPROCS %d), load average %s; %d Widgets, %d hostile objects, warm-up %v",
			runtime.NumCPU(), runtime.GOMAXPROCS(0), benchtest.LoadAvg(), n, m, warmup)
		var alone result
		for i, ph := range phases {
			r := run(b, ph, n, m, warmup)
			rate := float64(n) / r.took.Seconds()
			if i == 0 {
				alone = r
				b.Logf("%-16s %6.0f Widgets/s (%v)  GET p50 %v p99 %v (%d GETs); load average %s",
					ph.name, rate, r.took.Round(time.Millisecond), r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.gets, benchtest.LoadAvg())
				b.ReportMetric(rate, "alone-obj/s")
				continue
			}
			ratio := alone.took.Seconds() / r.took.Seconds()
			p99x := float64(r.p99) / float64(alone.p99)
			b.Logf("%-16s %6.0f Widgets/s (%v)  ratio %.2f (goal >= 0.90 %s)  GET p50 %v p99 %v = %.2fx alone (goal <= 2x %s); %d hostile updates, %d GETs; load average %s",
				ph.name, rate, r.took.Round(time.Millisecond), ratio, verdict(ratio >= 0.90),
				r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), p99x, verdict(p99x <= 2), r.churn, r.gets, benchtest.LoadAvg())
			if r.hostile != "" {
				b.Logf("%-16s hostile Plugin: %s", "", r.hostile)
			}
			b.ReportMetric(ratio, ph.name+"-ratio")
			b.ReportMetric(p99x, ph.name+"-p99x")
		}
	}
	if strings.Contains(os.Getenv("GOFLAGS"), "-race") {
		b.Log("note: built with -race; figures are not representative")
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
