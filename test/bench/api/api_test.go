// Package api benchmarks the Kubernetes-compatible API end to end (`make
// bench-api`) against a baseline measured in the same run.
//
// It starts the built server (test/testserver) and, beside it, a
// single-member etcd (Debian's etcd-server, on loopback ports in a temp
// data directory). It registers the Widget kind from
// examples/widget/crd.yaml and then, round by round, measures at
// concurrency 64 (CONCURRENCY):
//
//   - durable creates of 1 KiB Widgets (schema-validated, defaulted, CEL
//     rule checked) over HTTPS with the bearer token, next to raw etcd
//     Puts of 1 KiB values through go.etcd.io/etcd/client/v3;
//   - single-object GETs of those Widgets, next to etcd single-key Gets;
//   - the time to LIST the round's 10,000 Widgets (CREATES) in one request
//     and in pages of 500, next to etcd ranges over the same number of keys.
//
// The HTTP client keeps one TLS connection alive per worker (HTTP/1.1, as
// many idle connections per host as workers), and each side is warmed up
// before it is measured. Because the machines are shared, each phase also
// reports the CPU the server (or etcd) and this process spent per
// operation. PERF=PREFIX records the server with `perf record` during the
// first round's creates, GETs and LISTs, into PREFIX-create.data,
// PREFIX-get.data and PREFIX-list.data. SERVER_ENV adds space-separated
// NAME=VALUE pairs to the server's environment (GOGC=200, say). PPROF=PREFIX instead takes Go CPU
// profiles from the server's /debug/pprof/profile for the first
// PPROF_SECONDS (5) seconds of the first round's creates and GETs, into
// PREFIX-create.pprof and PREFIX-get.pprof, for `go tool pprof`.
//
// Everything the benchmark starts is stopped, and every temp directory
// removed, by b.Cleanup, and each phase gives up after PHASE_TIMEOUT
// seconds.
package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

const (
	group       = "/apis/example.setpoint.dev/v1"
	objectSize  = 1024
	annotation  = "bench.setpoint.dev/pad"
	pageLimit   = 500
	crdFile     = "examples/widget/crd.yaml"
	crdPath     = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	namespaces  = "/api/v1/namespaces"
	listRepeats = 3
)

func widgets(ns string) string { return group + "/namespaces/" + ns + "/widgets" }

// widget is a Widget's JSON, padded with an annotation to exactly size
// bytes. The schema keeps spec.name, spec.size and spec.color; metadata
// annotations are not pruned, so the whole body is stored.
func widget(name string, size int) []byte {
	head := fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":%q,"annotations":{%q:"`, name, annotation)
	tail := fmt.Sprintf(`"}},"spec":{"name":%q,"size":"medium","color":"blue"}}`, name)
	pad := size - len(head) - len(tail)
	if pad < 0 {
		pad = 0
	}
	return []byte(head + strings.Repeat("x", pad) + tail)
}

func objectName(i int) string { return fmt.Sprintf("w%07d", i) }

// apiClient talks to the server as a tuned client would: HTTP/1.1 over TLS
// with keep-alive and enough idle connections for every worker, no
// compression on loopback. HTTP2=1 multiplexes over HTTP/2 instead.
type apiClient struct {
	url, token string
	http       *http.Client
}

func newAPIClient(s *testserver.Server, workers int) *apiClient {
	tlsConfig := &tls.Config{RootCAs: s.CAPool, MinVersion: tls.VersionTLS12}
	tr := &http.Transport{
		TLSClientConfig:     tlsConfig,
		MaxIdleConns:        2 * workers,
		MaxIdleConnsPerHost: 2 * workers,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
	}
	if os.Getenv("HTTP2") == "1" {
		tr.ForceAttemptHTTP2 = true
	} else {
		tlsConfig.NextProtos = []string{"http/1.1"}
	}
	return &apiClient{url: s.URL, token: s.Token, http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
}

// do sends one request and reads the whole response.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (c *apiClient) expect(ctx context.Context, want int, method, path string, body []byte) ([]byte, error) {
	code, b, err := c.do(ctx, method, path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if code != want {
		return nil, fmt.Errorf("%s %s: %d %.300s", method, path, code, b)
	}
	return b, nil
}

// creates creates objects [from, from+n) in ns, c at a time.
func (c *apiClient) creates(workers, from, n int, ns string, timeout time.Duration) phase {
	p := widgets(ns)
	return run(workers, n, timeout, func(ctx context.Context, i int) error {
		_, err := c.expect(ctx, http.StatusCreated, "POST", p, widget(objectName(from+i), objectSize))
		return err
	})
}

// gets reads n single objects picked among the first objects of ns.
func (c *apiClient) gets(workers, n, objects int, ns string, timeout time.Duration) phase {
	p := widgets(ns) + "/"
	return run(workers, n, timeout, func(ctx context.Context, i int) error {
		_, err := c.expect(ctx, http.StatusOK, "GET", p+objectName(pick(i, objects)), nil)
		return err
	})
}

// list reads every Widget of ns in one request, or in pages of limit. It
// parses only what a paging client must (the list's metadata, which comes
// before the items) while timed; the items are counted afterwards.
func (c *apiClient) list(ctx context.Context, ns string, limit int) (time.Duration, int, error) {
	var bodies [][]byte
	start := time.Now()
	cont := ""
	for {
		p := widgets(ns)
		if limit > 0 {
			p += fmt.Sprintf("?limit=%d", limit)
			if cont != "" {
				p += "&continue=" + cont
			}
		}
		b, err := c.expect(ctx, http.StatusOK, "GET", p, nil)
		if err != nil {
			return 0, 0, err
		}
		bodies = append(bodies, b)
		if limit == 0 {
			break
		}
		if cont, err = benchtest.ListMeta(b, "continue"); err != nil {
			return 0, 0, err
		}
		if cont == "" {
			break
		}
	}
	elapsed := time.Since(start)
	items := 0
	for _, b := range bodies {
		var l struct {
			Items []struct{} `json:"items"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			return 0, 0, err
		}
		items += len(l.Items)
	}
	return elapsed, items, nil
}

// registerWidget applies examples/widget/crd.yaml and waits until Widgets
// are served.
func registerWidget(b *testing.B, c *apiClient) {
	y, err := os.ReadFile(filepath.Join(testserver.ModuleRoot(b), crdFile))
	if err != nil {
		b.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		b.Fatalf("%s: %v", crdFile, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.expect(ctx, http.StatusCreated, "POST", crdPath, j); err != nil {
		b.Fatal(err)
	}
	for {
		code, _, err := c.do(ctx, "GET", widgets("default"), nil)
		if err == nil && code == http.StatusOK {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("widgets not served: %v %d", err, code)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func createNamespace(b *testing.B, c *apiClient, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns)
	if _, err := c.expect(ctx, http.StatusCreated, "POST", namespaces, []byte(body)); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkAPI(b *testing.B) {
	workers := benchtest.Env("CONCURRENCY", 64)
	creates := benchtest.Env("CREATES", 10000)
	warmup := benchtest.Env("WARMUP", 2000)
	getsN := benchtest.Env("GETS", 20000)
	rounds := benchtest.Env("ROUNDS", 2)
	timeout := time.Duration(benchtest.Env("PHASE_TIMEOUT", 300)) * time.Second
	value := string(bytes.Repeat([]byte("x"), objectSize))

	for range b.N {
		etcd := startEtcd(b)
		s := testserver.Start(b, testserver.Options{LogLevel: "warn", Env: strings.Fields(os.Getenv("SERVER_ENV"))})
		serverPID, err := findPID("server", "--data-dir", s.DataDir)
		if err != nil {
			b.Fatal(err)
		}
		c := newAPIClient(s, workers)
		defer c.http.CloseIdleConnections()
		registerWidget(b, c)
		b.Logf("server %s (pid %d), etcd %s (pid %d); %d workers, %d-byte objects, GOMAXPROCS %d, load average %s",
			s.URL, serverPID, etcd.endpoint, etcd.pid(), workers, len(widget(objectName(0), objectSize)), runtime.GOMAXPROCS(0), benchtest.LoadAvg())

		// Warm up both sides: connections, caches, the runtime's heap.
		createNamespace(b, c, "warm")
		if p := c.creates(workers, 0, warmup, "warm", timeout); p.err != nil {
			b.Fatalf("warm-up creates: %v", p.err)
		}
		if p := c.gets(workers, warmup, warmup, "warm", timeout); p.err != nil {
			b.Fatalf("warm-up gets: %v", p.err)
		}
		if p := etcd.put(workers, warmup, "/warm/", value, timeout); p.err != nil {
			b.Fatalf("warm-up puts: %v", p.err)
		}
		if p := etcd.get(workers, warmup, warmup, "/warm/", timeout); p.err != nil {
			b.Fatalf("warm-up etcd gets: %v", p.err)
		}

		var ratios []float64
		for r := 1; r <= rounds; r++ {
			ns := fmt.Sprintf("bench-%d", r)
			prefix := fmt.Sprintf("/bench-%d/", r)
			createNamespace(b, c, ns)
			b.Logf("round %d (load average %s)", r, benchtest.LoadAvg())

			// Writes: etcd first, then the API, back to back.
			m := startCPU(etcd.pid())
			put := etcd.put(workers, creates, prefix, value, timeout)
			m.stop()
			if put.err != nil {
				b.Fatalf("etcd puts: %v", put.err)
			}
			report(b, "etcd Put (1 KiB)", put, m)

			stop := profile(b, r, "create", serverPID, c)
			m = startCPU(serverPID)
			create := c.creates(workers, 0, creates, ns, timeout)
			m.stop()
			stop()
			if create.err != nil {
				b.Fatalf("API creates: %v", create.err)
			}
			report(b, "API create (1 KiB Widget)", create, m)
			ratio := create.rate() / put.rate()
			ratios = append(ratios, ratio)
			b.Logf("round %d: API creates/s / etcd Puts/s = %.2fx (goal >= 2x); p99 %s vs %s", r, ratio, ms(create.quantile(0.99)), ms(put.quantile(0.99)))

			// Single-object reads.
			m = startCPU(etcd.pid())
			eget := etcd.get(workers, getsN, creates, prefix, timeout)
			m.stop()
			if eget.err != nil {
				b.Fatalf("etcd gets: %v", eget.err)
			}
			report(b, "etcd Get (one key)", eget, m)
			stop = profile(b, r, "get", serverPID, c)
			m = startCPU(serverPID)
			get := c.gets(workers, getsN, creates, ns, timeout)
			m.stop()
			stop()
			if get.err != nil {
				b.Fatalf("API gets: %v", get.err)
			}
			report(b, "API GET (one Widget)", get, m)
			b.Logf("round %d: API GETs/s / etcd Gets/s = %.2fx; p99 %s vs %s", r, get.rate()/eget.rate(), ms(get.quantile(0.99)), ms(eget.quantile(0.99)))

			// Lists of the round's objects.
			for _, limit := range []int{0, pageLimit} {
				how := "one request"
				if limit > 0 {
					how = fmt.Sprintf("pages of %d", limit)
				}
				var apiTimes, etcdTimes []time.Duration
				var apiCPU, etcdCPU float64
				for range listRepeats {
					ctx, cancel := context.WithTimeout(context.Background(), timeout)
					em := startCPU(etcd.pid())
					t0 := time.Now()
					n, err := etcd.list(ctx, prefix, limit)
					etcdTimes = append(etcdTimes, time.Since(t0))
					em.stop()
					etcdCPU += em.server
					if err == nil && n != creates {
						err = fmt.Errorf("listed %d keys, want %d", n, creates)
					}
					if err != nil {
						cancel()
						b.Fatalf("etcd list: %v", err)
					}
					stop := profile(b, r, "list", serverPID, nil)
					am := startCPU(serverPID)
					d, items, err := c.list(ctx, ns, limit)
					am.stop()
					stop()
					apiCPU += am.server
					cancel()
					if err == nil && items != creates {
						err = fmt.Errorf("listed %d objects, want %d", items, creates)
					}
					if err != nil {
						b.Fatalf("API list: %v", err)
					}
					apiTimes = append(apiTimes, d)
				}
				slices.Sort(apiTimes)
				slices.Sort(etcdTimes)
				api, base := apiTimes[len(apiTimes)/2], etcdTimes[len(etcdTimes)/2]
				b.Logf("round %d: LIST %d objects, %s: API %s, etcd range %s (median of %d; API min %s); API/etcd %.1fx the time; CPU per list: server %.0f ms, etcd %.0f ms",
					r, creates, how, ms(api), ms(base), listRepeats, ms(apiTimes[0]), float64(api)/float64(base),
					apiCPU/listRepeats*1000, etcdCPU/listRepeats*1000)
				b.ReportMetric(float64(api.Microseconds())/1000, fmt.Sprintf("list-ms/%s", strings.ReplaceAll(how, " ", "-")))
			}
			b.ReportMetric(create.rate(), "creates/s")
			b.ReportMetric(put.rate(), "etcd-puts/s")
			b.ReportMetric(float64(get.quantile(0.99).Microseconds())/1000, "get-p99-ms")
		}
		b.ReportMetric(slices.Min(ratios), "min-ratio")
		b.Logf("creates/s over etcd Puts/s by round: %v (goal >= 2x)", fmtRatios(ratios))
	}
}

func report(b *testing.B, what string, p phase, m *cpuMeter) {
	b.Logf("%-26s %6d in %8v: %8.0f/s  p50 %s  p99 %s  max %s  %s",
		what, p.ops, p.elapsed.Round(time.Millisecond), p.rate(), ms(p.quantile(0.5)), ms(p.quantile(0.99)), ms(p.quantile(1)), m.perOp(p.ops))
}

func fmtRatios(rs []float64) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprintf("%.2fx", r)
	}
	return strings.Join(s, ", ")
}

// profile records the server with perf during one phase of the first round
// when PERF is set, appending to the phase's file when it runs repeatedly
// (the lists), or with Go's CPU profiler through c when PPROF is set; the
// returned func stops the recording.
func profile(b *testing.B, round int, phase string, pid int, c *apiClient) func() {
	if prefix := os.Getenv("PPROF"); prefix != "" && round == 1 && c != nil {
		return pprofCPU(b, c, fmt.Sprintf("%s-%s.pprof", prefix, phase), benchtest.Env("PPROF_SECONDS", 5))
	}
	prefix := os.Getenv("PERF")
	if prefix == "" || round != 1 {
		return func() {}
	}
	file := fmt.Sprintf("%s-%s.data", prefix, phase)
	seq := perfRuns[file]
	perfRuns[file]++
	if seq > 0 {
		file = fmt.Sprintf("%s-%s.%d.data", prefix, phase, seq)
	}
	cmd := exec.Command("perf", "record", "-F", "999", "-g", "-p", fmt.Sprint(pid), "-o", file)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		b.Logf("perf: %v (profile skipped)", err)
		return func() {}
	}
	time.Sleep(500 * time.Millisecond) // let it attach
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		b.Logf("perf profile of the server during the %s phase: %s", phase, file)
	}
}

// perfRuns counts the recordings per file name.
var perfRuns = map[string]int{}

// pprofCPU takes a CPU profile of the server for the given seconds from
// now into file; the returned func waits for it.
func pprofCPU(b *testing.B, c *apiClient, file string, seconds int) func() {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds+60)*time.Second)
		defer cancel()
		body, err := c.expect(ctx, http.StatusOK, "GET", fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds), nil)
		if err == nil {
			err = os.WriteFile(file, body, 0o644)
		}
		done <- err
	}()
	return func() {
		if err := <-done; err != nil {
			b.Logf("pprof: %v (profile skipped)", err)
			return
		}
		b.Logf("Go CPU profile of the server, first %d s of the phase: %s", seconds, file)
	}
}
