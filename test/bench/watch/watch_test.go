// Package watch benchmarks watch fan-out end to end (`make bench-watch`) on
// the built server, while objects of one kind are written at rising rates:
// 1,000 WebSocket watchers (BenchmarkWebSocketWatch), 200 and 2,000
// chunked HTTP watchers as client-go's informers use
// (BenchmarkHTTPWatch), and the server's memory per idle WebSocket watcher
// with 10,000 of them (BenchmarkIdleWebSocketWatchers). It reports
// deliveries per second, write-to-receipt latency (p50, p99), the server's
// CPU per delivery and memory per idle watcher. The watchers run in the
// benchmark's process, so on a small machine they compete with the server
// for CPU. SETPOINT_BIN runs another build (such as main's) for a baseline.
package watch

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

var crd = testsupport.CRD{Kind: "Widget", Schema: `{"type":"object","properties":{
 "spec":{"type":"object","required":["name","size"],"properties":{
  "name":{"type":"string"},"size":{"type":"string","enum":["small","medium","large"]},"note":{"type":"string"}}}}}`}.String()

const path = "/apis/example.setpoint.dev/v1/namespaces/default/widgets"

// histogram counts latencies in 100 µs buckets up to 10 s.
type histogram struct {
	buckets [100001]atomic.Int64
	n       atomic.Int64
}

func (h *histogram) add(d time.Duration) {
	i := int(d / (100 * time.Microsecond))
	if i < 0 {
		i = 0
	}
	if i >= len(h.buckets) {
		i = len(h.buckets) - 1
	}
	h.buckets[i].Add(1)
	h.n.Add(1)
}

func (h *histogram) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	target := int64(math.Ceil(q * float64(n)))
	var sum int64
	for i := range h.buckets {
		sum += h.buckets[i].Load()
		if sum >= target {
			return time.Duration(i+1) * 100 * time.Microsecond
		}
	}
	return 10 * time.Second
}

func (h *histogram) reset() {
	for i := range h.buckets {
		h.buckets[i].Store(0)
	}
	h.n.Store(0)
}

type bench struct {
	b      *testing.B
	s      *testserver.Server
	client *http.Client
}

func (x *bench) do(method, p, ctype string, body []byte) (int, []byte) {
	req, err := http.NewRequest(method, x.s.URL+p, bytes.NewReader(body))
	if err != nil {
		x.b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+x.s.Token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := x.client.Do(req)
	if err != nil {
		x.b.Fatalf("%s %s: %v", method, p, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// metric reads one unlabelled sample from the server's /metrics.
func (x *bench) metric(name string) float64 {
	code, body := x.do("GET", "/metrics", "", nil)
	if code != 200 {
		x.b.Fatalf("/metrics: %d", code)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	x.b.Fatalf("/metrics has no %s", name)
	return 0
}

func (x *bench) serverMemory() float64 {
	return x.metric("go_memstats_heap_inuse_bytes") + x.metric("go_memstats_stack_inuse_bytes")
}

// watcher is one WebSocket watch; it counts what it receives and records the
// latency from the write's start (carried in spec.note) to receipt.
type watcher struct {
	c *websocket.Conn
}

var (
	noteKey        = []byte(`"note":"`)
	modifiedPrefix = []byte(`{"type":"MODIFIED"`)
)

// readAll appends what r holds to buf, growing it as needed.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// lastDelivery is when the last message arrived, in Unix nanoseconds.
var lastDelivery atomic.Int64

// others counts messages that are not MODIFIED events (there should be none).
var others atomic.Int64

func (x *bench) openWatchers(n int, rv string, lat *histogram, delivered *atomic.Int64, wg *sync.WaitGroup) []*watcher {
	d := websocket.Dialer{
		TLSClientConfig:  &tls.Config{RootCAs: x.s.CAPool, MinVersion: tls.VersionTLS12},
		HandshakeTimeout: 30 * time.Second,
		Subprotocols: []string{"base64url.bearer.authorization.k8s.io." +
			base64.RawURLEncoding.EncodeToString([]byte(x.s.Token)), "setpoint.watch.v1"},
		ReadBufferSize: 4096,
	}
	u := "wss" + strings.TrimPrefix(x.s.URL, "https") + path + "?watch=true&resourceVersion=" + rv
	ws := make([]*watcher, 0, n)
	for i := 0; i < n; i++ {
		c, _, err := d.Dial(u, nil)
		if err != nil {
			x.b.Fatalf("watcher %d: %v", i, err)
		}
		w := &watcher{c: c}
		ws = append(ws, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each message is read into a buffer of this watcher's, and only
			// its type and spec.note are looked at: the watchers share the
			// machine's cores with the server, so they spend as little as
			// they can.
			buf := make([]byte, 0, 4096)
			for {
				_, r, err := c.NextReader()
				if err != nil {
					return
				}
				msg, err := readAll(r, buf[:0])
				if err != nil {
					return
				}
				buf = msg[:0]
				now := time.Now()
				delivered.Add(1)
				lastDelivery.Store(now.UnixNano())
				if !bytes.HasPrefix(msg, modifiedPrefix) {
					others.Add(1)
				}
				if sent, ok := benchtest.Stamp(msg, noteKey); ok {
					lat.add(now.Sub(sent))
				}
			}
		}()
	}
	return ws
}

func BenchmarkWebSocketWatch(b *testing.B) {
	watchers := benchtest.Env("WATCHERS", 1000)
	objects := 100
	phase := time.Duration(benchtest.Env("PHASE_SECONDS", 3)) * time.Second
	rates := []int{100, 300, 1000}
	if v := os.Getenv("RATES"); v != "" {
		rates = nil
		for _, f := range strings.Split(v, ",") {
			if r, err := strconv.Atoi(f); err == nil {
				rates = append(rates, r)
			}
		}
	}
	for i := 0; i < b.N; i++ {
		b.ReportMetric(idleMemory(b, watchers, nil), "server-bytes/idle-watcher")

		x := newBench(b, testserver.Options{LogLevel: "warn", Args: limitsFor(watchers)})
		for j := 0; j < objects; j++ {
			obj := fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w%03d"},"spec":{"name":"w%03d","size":"small","note":"0"}}`, j, j)
			if code, body := x.do("POST", path, "application/json", []byte(obj)); code != 201 {
				b.Fatalf("create: %d %s", code, body)
			}
		}
		rv := x.listRV()
		lat := &histogram{}
		var delivered atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		ws := x.openWatchers(watchers, rv, lat, &delivered, &wg)
		b.Logf("%d watchers connected in %v", watchers, time.Since(t0).Round(time.Millisecond))

		time.Sleep(time.Second)
		others.Store(0)
		for _, rate := range rates {
			lat.reset()
			delivered.Store(0)
			lastDelivery.Store(0)
			cpu0, self0 := x.metric("process_cpu_seconds_total"), benchtest.SelfCPU()
			start := time.Now()
			writes, wlat := x.write(rate, phase, objects)
			writing := time.Since(start)
			// Let the tail arrive, within reason.
			want := int64(writes) * int64(watchers)
			drain := time.Now().Add(20 * time.Second)
			for delivered.Load() < want && time.Now().Before(drain) {
				time.Sleep(20 * time.Millisecond)
			}
			got := delivered.Load()
			serverCPU, clientCPU := x.metric("process_cpu_seconds_total")-cpu0, benchtest.SelfCPU()-self0
			elapsed := time.Unix(0, lastDelivery.Load()).Sub(start)
			perSec := float64(got) / elapsed.Seconds()
			b.Logf("offered %5d writes/s: %d writes in %v (%.0f/s achieved, write p50 %v); %d/%d deliveries in %v: %.0f deliveries/s; write-to-receipt p50 %v p99 %v",
				rate, writes, writing.Round(time.Millisecond), float64(writes)/writing.Seconds(), wlat.quantile(0.5),
				got, want, elapsed.Round(time.Millisecond), perSec, lat.quantile(0.5), lat.quantile(0.99))
			if got > 0 {
				b.Logf("offered %5d writes/s: CPU per delivery: server %.1f µs (ceiling on 2 idle cores %.0f deliveries/s), watchers in this process %.1f µs",
					rate, serverCPU/float64(got)*1e6, 2/(serverCPU/float64(got)), clientCPU/float64(got)*1e6)
				b.ReportMetric(serverCPU/float64(got)*1e6, fmt.Sprintf("server-cpu-µs/delivery@%d", rate))
			}
			b.ReportMetric(perSec, fmt.Sprintf("deliveries/s@%d", rate))
			b.ReportMetric(float64(lat.quantile(0.99).Microseconds())/1000, fmt.Sprintf("p99-ms@%d", rate))
			if n := others.Swap(0); n > 0 {
				b.Logf("offered %d/s: %d messages were not MODIFIED events", rate, n)
			}
			if got == 0 {
				b.Errorf("offered %d/s: no event reached any of the %d watchers (%d writes)", rate, watchers, writes)
			} else if got < want {
				b.Logf("offered %d/s: %d deliveries missing after the drain (watchers closed as too slow, or still behind)", rate, want-got)
			}
		}
		for _, w := range ws {
			w.c.Close()
		}
		wg.Wait()
		if err := x.s.Stop(); err != nil {
			b.Errorf("stop server: %v", err)
		}
	}
}

// limitsFor is the server's arguments that let n watches and their
// connections in, all from the loopback address.
func limitsFor(n int) []string {
	m := strconv.Itoa(2*n + 256)
	return []string{"--max-watches", m, "--max-connections", m, "--max-connections-per-address", m}
}

// newBench starts a server and registers the Widget kind.
func newBench(b *testing.B, opts testserver.Options) *bench {
	s := testserver.Start(b, opts)
	x := &bench{b: b, s: s, client: s.HTTPClient()}
	x.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	if code, body := x.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", []byte(crd)); code != 201 {
		b.Fatalf("create CRD: %d %s", code, body)
	}
	testsupport.Eventually(b, 15*time.Second, "widgets served", func() bool {
		code, _ := x.do("GET", path, "", nil)
		return code == 200
	})
	return x
}

func (x *bench) listRV() string {
	_, body := x.do("GET", path+"?limit=1", "", nil)
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &list); err != nil || list.Metadata.ResourceVersion == "" {
		x.b.Fatalf("list: %v %.200s", err, body)
	}
	return list.Metadata.ResourceVersion
}

// idleMemory opens n idle watchers on a server of its own that runs with
// GOGC=5, so that its heap holds little garbage and the figures read from
// /metrics are close to the live heap, and returns the growth of the heap and
// goroutine stacks per watcher. open, when not nil, is called with the
// watchers open, after the figures are read.
func idleMemory(b *testing.B, n int, open func(*bench)) float64 {
	x := newBench(b, testserver.Options{LogLevel: "warn", Env: []string{"GOGC=5"}, Args: limitsFor(n)})
	rv := x.listRV()
	time.Sleep(time.Second)
	memBefore, rssBefore, gBefore := x.serverMemory(), x.metric("process_resident_memory_bytes"), x.metric("go_goroutines")
	stackBefore := x.metric("go_memstats_stack_inuse_bytes")
	var delivered atomic.Int64
	var wg sync.WaitGroup
	ws := x.openWatchers(n, rv, &histogram{}, &delivered, &wg)
	time.Sleep(2 * time.Second)
	memAfter, rssAfter, gAfter := x.serverMemory(), x.metric("process_resident_memory_bytes"), x.metric("go_goroutines")
	stacks := (x.metric("go_memstats_stack_inuse_bytes") - stackBefore) / float64(n)
	per := (memAfter - memBefore) / float64(n)
	if open != nil {
		open(x)
	}
	b.Logf("%d idle watchers: server heap+stacks %+.1f MiB (%.0f bytes/watcher, %.0f of them stacks), RSS %+.1f MiB, %.1f goroutines/watcher",
		n, (memAfter-memBefore)/(1<<20), per, stacks, (rssAfter-rssBefore)/(1<<20), (gAfter-gBefore)/float64(n))
	for _, w := range ws {
		w.c.Close()
	}
	wg.Wait()
	if err := x.s.Stop(); err != nil {
		b.Errorf("stop server: %v", err)
	}
	return per
}

// write updates objects round robin at rate per second for d, from 32
// writers, and returns how many writes succeeded and their latency. It
// offers no more writes after d, so a saturated server ends the phase on
// time with fewer writes.
func (x *bench) write(rate int, d time.Duration, objects int) (int, *histogram) {
	total := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	jobs := make(chan int)
	var ok atomic.Int64
	wlat := &histogram{}
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				start := time.Now()
				patch := fmt.Sprintf(`{"spec":{"note":"%d"}}`, start.UnixNano())
				code, _ := x.do("PATCH", fmt.Sprintf("%s/w%03d", path, j%objects), "application/merge-patch+json", []byte(patch))
				if code == 200 {
					ok.Add(1)
					wlat.add(time.Since(start))
				}
			}
		}()
	}
	t0 := time.Now()
	end := t0.Add(d)
	for j := 0; j < total && time.Now().Before(end); j++ {
		if wait := time.Until(t0.Add(time.Duration(j) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	return int(ok.Load()), wlat
}
