package watch

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// BenchmarkHTTPWatch is BenchmarkWebSocketWatch over chunked HTTP, the
// transport client-go's informers use: HTTP_WATCHERS watches (200 and
// 2,000 by default) of one kind while its objects are written at rising
// rates. The watches share one HTTP/2 transport as a client-go client's
// do (HTTP1=1: one HTTP/1.1 connection each instead). It reports
// deliveries per second, write-to-receipt p99 and the server's CPU per
// delivery. With PROFILE=file it saves the server's CPU profile of the
// last phase of the last size there.
func BenchmarkHTTPWatch(b *testing.B) {
	sizes := []int{200, 2000}
	if v := os.Getenv("HTTP_WATCHERS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(f); err == nil && n > 0 {
				sizes = append(sizes, n)
			}
		}
	}
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
	b.Logf("load average %s", benchtest.LoadAvg())
	for i := 0; i < b.N; i++ {
		for si, watchers := range sizes {
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
			ctx, cancel := context.WithCancel(context.Background())
			t0 := time.Now()
			x.openHTTPWatchers(ctx, watchers, rv, lat, &delivered, &wg)
			b.Logf("%d HTTP watchers connected in %v", watchers, time.Since(t0).Round(time.Millisecond))
			time.Sleep(time.Second)
			others.Store(0)
			cut.Store(0)
			for ri, rate := range rates {
				var prof chan []byte
				if p := os.Getenv("PROFILE"); p != "" && si == len(sizes)-1 && ri == len(rates)-1 {
					prof = x.profile(phase)
				}
				x.phase(fmt.Sprintf("%d watchers, offered %5d writes/s", watchers, rate), fmt.Sprintf("@%dw%d", watchers, rate),
					rate, phase, objects, watchers, lat, &delivered)
				if prof != nil {
					if err := os.WriteFile(os.Getenv("PROFILE"), <-prof, 0o644); err != nil {
						b.Errorf("save profile: %v", err)
					}
				}
			}
			cancel()
			wg.Wait()
			if err := x.s.Stop(); err != nil {
				b.Errorf("stop server: %v", err)
			}
		}
	}
}

var errorPrefix = []byte(`{"type":"ERROR"`)

// cut counts the watches the server ended with an ERROR event.
var cut atomic.Int64

// phase writes at rate for d and reports what the watchers received.
func (x *bench) phase(what, suffix string, rate int, d time.Duration, objects, watchers int, lat *histogram, delivered *atomic.Int64) {
	b := x.b
	lat.reset()
	delivered.Store(0)
	lastDelivery.Store(0)
	cpu0, self0 := x.metric("process_cpu_seconds_total"), benchtest.SelfCPU()
	start := time.Now()
	writes, wlat := x.write(rate, d, objects)
	writing := time.Since(start)
	want := int64(writes) * int64(watchers)
	drain := time.Now().Add(20 * time.Second)
	for delivered.Load() < want && time.Now().Before(drain) {
		time.Sleep(20 * time.Millisecond)
	}
	got := delivered.Load()
	serverCPU, clientCPU := x.metric("process_cpu_seconds_total")-cpu0, benchtest.SelfCPU()-self0
	elapsed := time.Unix(0, lastDelivery.Load()).Sub(start)
	perSec := float64(got) / elapsed.Seconds()
	b.Logf("%s: %d writes in %v (%.0f/s achieved, write p50 %v); %d/%d deliveries in %v: %.0f deliveries/s; write-to-receipt p50 %v p99 %v",
		what, writes, writing.Round(time.Millisecond), float64(writes)/writing.Seconds(), wlat.quantile(0.5),
		got, want, elapsed.Round(time.Millisecond), perSec, lat.quantile(0.5), lat.quantile(0.99))
	if got > 0 {
		b.Logf("%s: CPU per delivery: server %.2f µs, watchers in this process %.2f µs",
			what, serverCPU/float64(got)*1e6, clientCPU/float64(got)*1e6)
		b.ReportMetric(serverCPU/float64(got)*1e6, "server-cpu-µs/delivery"+suffix)
	}
	b.ReportMetric(perSec, "deliveries/s"+suffix)
	b.ReportMetric(float64(lat.quantile(0.99).Microseconds())/1000, "p99-ms"+suffix)
	if n := others.Swap(0); n > 0 {
		b.Logf("%s: %d messages were not MODIFIED events", what, n)
	}
	if n := cut.Load(); n > 0 {
		b.Logf("%s: %d of %d watches so far ended by the server with an ERROR event (fell behind)", what, n, watchers)
	}
	if got == 0 && cut.Load() == 0 {
		b.Errorf("%s: no event reached any of the %d watchers (%d writes)", what, watchers, writes)
	} else if got < want {
		b.Logf("%s: %d deliveries missing after the drain", what, want-got)
	}
}

// profile fetches the server's CPU profile over the next d.
func (x *bench) profile(d time.Duration) chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", x.s.URL, int(d.Seconds())), nil)
		req.Header.Set("Authorization", "Bearer "+x.s.Token)
		c := x.s.HTTPClient()
		c.Timeout = d + 30*time.Second
		resp, err := c.Do(req)
		if err != nil {
			x.b.Logf("profile: %v", err)
			ch <- nil
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		ch <- body
	}()
	return ch
}

// openHTTPWatchers opens n chunked HTTP watches from rv, each read by a
// goroutine until ctx ends, and returns once all have their response
// headers.
func (x *bench) openHTTPWatchers(ctx context.Context, n int, rv string, lat *histogram, delivered *atomic.Int64, wg *sync.WaitGroup) {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: x.s.CAPool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: n,
	}
	if os.Getenv("HTTP1") != "" {
		tr.ForceAttemptHTTP2 = false
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	client := &http.Client{Transport: tr}
	u := x.s.URL + path + "?watch=true&resourceVersion=" + rv
	opened := make(chan error, n)
	sem := make(chan struct{}, 64)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
			req.Header.Set("Authorization", "Bearer "+x.s.Token)
			resp, err := client.Do(req)
			<-sem
			if err == nil && resp.StatusCode != 200 {
				err = fmt.Errorf("watch: %s", resp.Status)
				resp.Body.Close()
			}
			opened <- err
			if err != nil {
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 4096)
			for {
				line, err := benchtest.ReadLine(br)
				if err != nil {
					return
				}
				now := time.Now()
				delivered.Add(1)
				lastDelivery.Store(now.UnixNano())
				if !bytes.HasPrefix(line, modifiedPrefix) {
					others.Add(1)
					if bytes.HasPrefix(line, errorPrefix) {
						// The server ended this watch (410 when it fell
						// behind); a client would list and watch again.
						cut.Add(1)
					}
				}
				if sent, ok := benchtest.Stamp(line, noteKey); ok {
					lat.add(now.Sub(sent))
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-opened; err != nil {
			x.b.Fatalf("watcher %d: %v", i, err)
		}
	}
}
