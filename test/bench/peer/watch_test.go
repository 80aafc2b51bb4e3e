package peer

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
)

// fanOut is the outcome of one watch fan-out run.
type fanOut struct {
	watchers, updates int
	delivered, want   int64
	rate              float64       // events delivered per second
	p99               time.Duration // write start to receipt
	cpuUS, clientUS   float64       // CPU per delivered event: the server's, the watchers'
	cut               int64         // watches the server ended before the run did
}

var (
	modifiedPrefix = []byte(`{"type":"MODIFIED"`)
	errorPrefix    = []byte(`{"type":"ERROR"`)
	sentField      = []byte(fmt.Sprintf("%q:\"", sentKey))
)

// watcher is one chunked HTTP watch; only its goroutine touches it until
// the run ends.
type watcher struct {
	lat  []time.Duration // write start to receipt, per event
	last time.Time       // the last event's receipt
}

// watch opens n chunked HTTP watches of the Widgets from the current
// resourceVersion, all through one client-go HTTP client as one process's
// informers would share it, then patches the first objects Widgets round
// robin, updates times from writers goroutines as fast as they complete.
// It waits for every watcher to receive every update (or for delivery to
// stall for 10 s) and reports the events delivered per second from the
// first write to the last receipt, the write-to-receipt p99 and the
// server's CPU per delivered event.
func (w *workload) watch(n, updates, writers, objects int) fanOut {
	b := w.b
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body, err := w.raw(ctx, widgetsPath, "limit", "1")
	if err != nil {
		b.Fatalf("%s: LIST: %v", w.s.name, err)
	}
	rv, err := benchtest.ListMeta(body, "resourceVersion")
	if err != nil || rv == "" {
		b.Fatalf("%s: LIST has no resourceVersion: %v %.200s", w.s.name, err, body)
	}
	url := w.host + widgetsPath + "?watch=true&resourceVersion=" + rv

	var delivered, cut atomic.Int64
	var wg sync.WaitGroup
	ws := make([]*watcher, n)
	opened := make(chan error, n)
	sem := make(chan struct{}, 64)
	t0 := time.Now()
	for i := range ws {
		x := &watcher{lat: make([]time.Duration, 0, updates)}
		ws[i] = x
		wg.Go(func() {
			sem <- struct{}{}
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			req.Header.Set("Accept", "application/json")
			resp, err := w.http.Do(req)
			<-sem
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("watch: %s", resp.Status)
				resp.Body.Close()
			}
			opened <- err
			if err != nil {
				return
			}
			defer resp.Body.Close()
			x.read(resp, &delivered)
			if ctx.Err() == nil {
				cut.Add(1)
			}
		})
	}
	for i := range n {
		if err := <-opened; err != nil {
			cancel()
			wg.Wait()
			b.Fatalf("%s: watcher %d: %v", w.s.name, i, err)
		}
	}
	b.Logf("%s: %d watches open in %v", w.s.name, n, time.Since(t0).Round(time.Millisecond))

	want := int64(updates) * int64(n)
	cpu0, self0 := w.s.cpu(b), benchtest.SelfCPU()
	start := time.Now()
	p := benchtest.Run(writers, updates, w.timeout, func(ctx context.Context, i int) error {
		return w.patchSent(ctx, objectName(i%objects))
	})
	if p.Err != nil {
		cancel()
		wg.Wait()
		b.Fatalf("%s: updates: %v", w.s.name, p.Err)
	}
	// Wait for the tail: every event delivered, or no progress for 10 s.
	deadline := time.Now().Add(w.timeout)
	last, lastChange := delivered.Load(), time.Now()
	for got := last; got < want && time.Now().Before(deadline) && time.Since(lastChange) < 10*time.Second; got = delivered.Load() {
		if got != last {
			last, lastChange = got, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	cpu, self := w.s.cpu(b)-cpu0, benchtest.SelfCPU()-self0
	got := delivered.Load()
	cancel()
	wg.Wait()

	var lat []time.Duration
	end := start
	for _, x := range ws {
		lat = append(lat, x.lat...)
		if x.last.After(end) {
			end = x.last
		}
	}
	slices.Sort(lat)
	f := fanOut{watchers: n, updates: updates, delivered: got, want: want, cut: cut.Load(),
		rate: float64(got) / end.Sub(start).Seconds(), p99: benchtest.Quantile(lat, 0.99)}
	if got > 0 {
		f.cpuUS, f.clientUS = cpu/float64(got)*1e6, self/float64(got)*1e6
	}
	b.Logf("%s: %d watchers x %d updates (%.0f writes/s): %d/%d events in %v, %.0f events/s, p50 %v p99 %v, CPU per event: server %.2f µs, watchers %.2f µs; %d watches ended by the server",
		w.s.name, n, updates, p.Rate(), got, want, end.Sub(start).Round(time.Millisecond), f.rate,
		benchtest.Quantile(lat, 0.5), f.p99, f.cpuUS, f.clientUS, f.cut)
	if got == 0 {
		b.Fatalf("%s: no event reached any of the %d watchers", w.s.name, n)
	}
	return f
}

// read counts the events of one watch until it ends, and records how long
// after its write each one arrived.
func (x *watcher) read(resp *http.Response, delivered *atomic.Int64) {
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	for {
		line, err := benchtest.ReadLine(br)
		if err != nil {
			return
		}
		now := time.Now()
		if !bytes.HasPrefix(line, modifiedPrefix) {
			if bytes.HasPrefix(line, errorPrefix) {
				return // the server ended this watch (410 when it fell behind)
			}
			continue
		}
		delivered.Add(1)
		x.last = now
		if sent, ok := benchtest.Stamp(line, sentField); ok {
			x.lat = append(x.lat, now.Sub(sent))
		}
	}
}
