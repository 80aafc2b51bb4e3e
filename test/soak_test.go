package test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestSoak runs the built server with the example plugins under steady
// churn for SETPOINT_SOAK (a duration such as 10m; `make soak-server` sets
// it, and the test skips without it): widgets are created, edited and
// deleted at a bounded rate around a population, the widget plugin is
// hot-swapped every minute (SETPOINT_SOAK_SWAP changes that), and watchers stream the widgets over HTTP with a
// short timeoutSeconds, so they reconnect from their last resourceVersion
// all the time. Then the load stops and the test checks that
//
//   - every widget converges (Ready, observedGeneration == generation, its
//     one WidgetProvision) and no provision outlives its widget;
//   - every watcher's cache, built only from its events across all its
//     reconnects, equals a fresh list (names and resourceVersions), and no
//     watcher ever saw a resourceVersion go backwards;
//   - the server did not leak: goroutines and open files came back to what
//     they were after the warm-up, and the live heap (sampled after a
//     garbage collection) stayed within a bound of it.
//
// The samples of /metrics are printed as a table.
func TestSoak(t *testing.T) {
	v := os.Getenv("SETPOINT_SOAK")
	if v == "" {
		t.Skip("SETPOINT_SOAK is not set (make soak-server runs this for 10 minutes)")
	}
	duration, err := time.ParseDuration(v)
	if err != nil || duration < time.Minute {
		t.Fatalf("SETPOINT_SOAK=%q: want a duration of a minute or more", v)
	}
	widgetModule, err := os.ReadFile(filepath.Join("..", "bin", "wasm", "widget-plugin.wasm"))
	if err != nil {
		t.Fatalf("%v (make plugins builds it)", err)
	}
	s := testserver.Start(t, testserver.Options{Args: []string{"--examples", "--examples-dir", filepath.Join("..", "examples")}, LogLevel: "warn"})
	a := &acceptance{t: t, s: s, c: s.HTTPClient()}
	a.c.Timeout = 2 * time.Minute
	t.Cleanup(a.c.CloseIdleConnections)
	a.pluginLoaded("widget", "")

	const (
		population = 300              // widgets the churn keeps around
		opsPerSec  = 40               // creates, edits and deletes together
		watchers   = 8                // HTTP watches of the widgets
		sampleEach = 15 * time.Second // /metrics samples
	)
	swapEach := time.Minute
	if v := os.Getenv("SETPOINT_SOAK_SWAP"); v != "" {
		if swapEach, err = time.ParseDuration(v); err != nil || swapEach <= 0 {
			t.Fatalf("SETPOINT_SOAK_SWAP=%q: want a positive duration", v)
		}
	}
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	report := func(err error) {
		if err == nil {
			return
		}
		select {
		case errs <- err:
		default:
		}
	}

	// Watchers, each with its own cache.
	ws := make([]*soakWatcher, watchers)
	for i := range ws {
		ws[i] = &soakWatcher{s: s, c: s.HTTPClient(), objects: map[string]int64{}}
		wg.Go(func() { report(ws[i].run(ctx, i)) })
	}

	// Churn.
	var ops, creates, edits, deletes atomic.Int64
	wg.Go(func() {
		tick := time.NewTicker(time.Second / opsPerSec)
		defer tick.Stop()
		live := map[string]bool{}
		next := 0
		sizes := []string{"small", "medium", "large"}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var names []string
			for n := range live {
				names = append(names, n)
			}
			var code int
			var b []byte
			var err error
			switch r := rand.IntN(100); {
			case len(live) < population/2 || (len(live) < population && r < 40):
				name := fmt.Sprintf("soak-%d", next)
				next++
				body := fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":%q},"spec":{"name":"Soak %d","size":%q}}`, name, next, sizes[next%3])
				if code, b, err = a.do("POST", accWidgets, "application/json", []byte(body)); err == nil && code == http.StatusCreated {
					live[name] = true
					creates.Add(1)
				}
			case r < 80:
				name := names[rand.IntN(len(names))]
				patch := fmt.Sprintf(`{"spec":{"size":%q}}`, sizes[rand.IntN(3)])
				if code, b, err = a.do("PATCH", accWidgets+"/"+name, "application/merge-patch+json", []byte(patch)); err == nil && code == http.StatusOK {
					edits.Add(1)
				}
			default:
				name := names[rand.IntN(len(names))]
				if code, b, err = a.do("DELETE", accWidgets+"/"+name, "", nil); err == nil && (code == http.StatusOK || code == http.StatusAccepted) {
					delete(live, name)
					deletes.Add(1)
				}
			}
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				report(fmt.Errorf("churn: %w", err))
				return
			}
			if code >= 300 && code != http.StatusConflict {
				report(fmt.Errorf("churn: %d %s", code, b))
				return
			}
			ops.Add(1)
		}
	})

	// Hot swaps.
	var swaps atomic.Int64
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(swapEach):
			}
			if _, err := a.swap(withCustomSection(widgetModule, fmt.Sprintf("soak-swap-%d", i))); err != nil {
				if ctx.Err() == nil {
					report(fmt.Errorf("swap %d: %w", i, err))
				}
				return
			}
			swaps.Add(1)
		}
	})

	// Samples, the baseline after a quarter of the run.
	var samples []soakSample
	warmup := duration / 4
	start := time.Now()
	var baseline soakSample
	for elapsed := time.Duration(0); elapsed < duration; elapsed = time.Since(start) {
		select {
		case err := <-errs:
			stopLoad()
			wg.Wait()
			t.Fatal(err)
		case <-time.After(min(sampleEach, duration-elapsed)):
		}
		smp := a.soakSample(time.Since(start), ops.Load())
		samples = append(samples, smp)
		if baseline.at == 0 && smp.at >= warmup {
			baseline = smp
		}
	}
	stopLoad()
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%s of churn: %d operations (%d creates, %d edits, %d deletes), %d hot swaps, %d watch reconnects",
		duration, ops.Load(), creates.Load(), edits.Load(), deletes.Load(), swaps.Load(), soakReconnects(ws))

	// Convergence, then the watchers' caches against a fresh list.
	converged := func() string {
		if msg := a.widgetsConverged("", -1); msg != "" {
			return msg
		}
		if w, p := len(a.list(accWidgets, "")), len(a.list(accProvisions, "")); w != p {
			return fmt.Sprintf("%d widgets but %d provisions", w, p)
		}
		return ""
	}
	limit := accConvergeLimit
	convergeStart := time.Now()
	for msg := converged(); msg != ""; msg = converged() {
		if time.Since(convergeStart) > limit {
			a.dumpUnconverged()
			t.Fatalf("widgets not converged %s after the churn: %s", limit, msg)
		}
		time.Sleep(time.Second)
	}
	took := time.Since(convergeStart)
	t.Logf("converged %s after the load stopped", took.Round(time.Millisecond))
	ctx2, stopWatch := context.WithCancel(context.Background())
	for i, w := range ws {
		wg.Go(func() { report(w.run(ctx2, i)) })
	}
	a.eventually("watch caches equal a list", time.Minute, func() string {
		want := a.listVersions()
		for i, w := range ws {
			if msg := w.differs(want); msg != "" {
				return fmt.Sprintf("watcher %d: %s", i, msg)
			}
		}
		return ""
	})
	stopWatch()
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	for i, w := range ws {
		if w.backwards.Load() > 0 {
			t.Errorf("watcher %d saw the resourceVersion go backwards %d times", i, w.backwards.Load())
		}
	}

	// Leaks: after the pools' idle trim and a quiet spell, against the
	// baseline taken under the same watchers and plugins.
	time.Sleep(30 * time.Second)
	end := a.soakSample(time.Since(start), ops.Load())
	samples = append(samples, end)
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "%8s %8s %10s %12s %10s %9s %12s\n", "at", "ops", "goroutines", "heap in use", "RSS", "open fds", "not store's")
	for _, smp := range samples {
		mark := ""
		if smp.at == baseline.at {
			mark = "  <- baseline"
		}
		fmt.Fprintf(&tbl, "%8s %8d %10.0f %9.1f MiB %6.1f MiB %9.0f %12d%s\n", smp.at.Round(time.Second), smp.ops,
			smp.goroutines, smp.heap/(1<<20), smp.rss/(1<<20), smp.fds, smp.otherFDs, mark)
	}
	t.Logf("server samples (the last after the load stopped and everything converged):\n%s", tbl.String())
	if end.goroutines > baseline.goroutines+25 {
		t.Errorf("goroutines: %.0f at the end, %.0f after the warm-up", end.goroutines, baseline.goroutines)
	}
	// The store opens files as its data grows (tables, value logs); the
	// others (sockets, modules' caches) must come back.
	if end.otherFDs > baseline.otherFDs+5 {
		t.Errorf("open files outside the store: %d at the end, %d after the warm-up", end.otherFDs, baseline.otherFDs)
	}
	if limit := 1.5*baseline.heap + 64<<20; end.heap > limit {
		t.Errorf("heap in use: %.1f MiB at the end, %.1f MiB after the warm-up (limit %.1f MiB)", end.heap/(1<<20), baseline.heap/(1<<20), limit/(1<<20))
	}
}

// dumpUnconverged logs, for the widgets that are not converged, the object
// and its events, and the controller's metrics.
func (a *acceptance) dumpUnconverged() {
	a.t.Helper()
	var l struct{ Items []map[string]any }
	if err := json.Unmarshal(a.must("GET", accWidgets, "", nil, 200), &l); err != nil {
		a.t.Fatal(err)
	}
	n := 0
	for _, it := range l.Items {
		b, _ := json.Marshal(it)
		var o accObject
		_ = json.Unmarshal(b, &o)
		st, _, _, gen := o.ready()
		if o.Metadata.DeletionTimestamp == "" && st == "True" && gen == o.Metadata.Generation {
			continue
		}
		if n++; n > 5 {
			break
		}
		evs := a.must("GET", "/api/v1/namespaces/"+accNS+"/events?fieldSelector=involvedObject.name="+o.Metadata.Name, "", nil, 200)
		a.t.Logf("not converged: %s\nits events: %s", b, evs)
	}
	var metrics []string
	for _, line := range strings.Split(string(a.must("GET", "/metrics", "", nil, 200)), "\n") {
		if strings.HasPrefix(line, "setpoint_workqueue_depth") || strings.HasPrefix(line, "setpoint_controller_reconcile_total") ||
			strings.HasPrefix(line, "setpoint_workqueue_retries_total") {
			metrics = append(metrics, line)
		}
	}
	a.t.Logf("controller metrics:\n%s", strings.Join(metrics, "\n"))
}

type soakSample struct {
	at               time.Duration
	ops              int64
	goroutines, heap float64
	rss, fds         float64
	otherFDs         int // open files outside the data directory's store
}

var soakMetricLine = regexp.MustCompile(`(?m)^(go_goroutines|go_memstats_heap_inuse_bytes|process_resident_memory_bytes|process_open_fds) (\S+)$`)

// soakSample reads the server's gauges right after a garbage collection,
// which the heap profile's gc=1 runs, so that the heap in use is the live
// heap and not whatever garbage the last cycle left.
func (a *acceptance) soakSample(at time.Duration, ops int64) soakSample {
	a.t.Helper()
	a.must("GET", "/debug/pprof/heap?gc=1", "", nil, 200)
	smp := soakSample{at: at, ops: ops, otherFDs: a.otherFDs()}
	for _, m := range soakMetricLine.FindAllStringSubmatch(string(a.must("GET", "/metrics", "", nil, 200)), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		switch m[1] {
		case "go_goroutines":
			smp.goroutines = v
		case "go_memstats_heap_inuse_bytes":
			smp.heap = v
		case "process_resident_memory_bytes":
			smp.rss = v
		case "process_open_fds":
			smp.fds = v
		}
	}
	return smp
}

// otherFDs counts the server's open files that are not its store's (under
// the data directory's store), from /proc.
func (a *acceptance) otherFDs() int {
	a.t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", a.s.Pid())
	entries, err := os.ReadDir(dir)
	if err != nil {
		a.t.Fatalf("open files of the server: %v", err)
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || strings.HasPrefix(target, filepath.Join(a.s.DataDir, "store")) {
			continue
		}
		n++
	}
	return n
}

// listVersions lists the widgets: name to resourceVersion, and the list's
// resourceVersion.
func (a *acceptance) listVersions() map[string]int64 {
	a.t.Helper()
	var l struct {
		Items []struct {
			Metadata struct{ Name, ResourceVersion string } `json:"metadata"`
		}
	}
	if err := json.Unmarshal(a.must("GET", accWidgets, "", nil, 200), &l); err != nil {
		a.t.Fatal(err)
	}
	out := map[string]int64{}
	for _, it := range l.Items {
		rv, _ := strconv.ParseInt(it.Metadata.ResourceVersion, 10, 64)
		out[it.Metadata.Name] = rv
	}
	return out
}

// soakWatcher keeps a cache of the widgets from a list and then watches,
// resuming from the last resourceVersion it saw each time the server ends
// a watch (timeoutSeconds), as an informer does.
type soakWatcher struct {
	s          *testserver.Server
	c          *http.Client
	mu         sync.Mutex
	objects    map[string]int64 // name → resourceVersion
	rv         int64            // the last resourceVersion seen
	listed     bool
	reconnects atomic.Int64
	backwards  atomic.Int64
}

func soakReconnects(ws []*soakWatcher) int64 {
	var n int64
	for _, w := range ws {
		n += w.reconnects.Load()
	}
	return n
}

// run watches until ctx is done; it returns an error only for what an
// informer could not recover from.
func (w *soakWatcher) run(ctx context.Context, i int) error {
	w.mu.Lock()
	listed := w.listed
	w.mu.Unlock()
	if !listed {
		if err := w.list(ctx); err != nil {
			return err
		}
	}
	for ctx.Err() == nil {
		w.mu.Lock()
		rv := w.rv
		w.mu.Unlock()
		// Timeouts of 5-15 s: the watches end and resume all the time.
		path := fmt.Sprintf("%s?watch=true&resourceVersion=%d&allowWatchBookmarks=true&timeoutSeconds=%d", accWidgets, rv, 5+(i+int(w.reconnects.Load()))%11)
		err := w.watch(ctx, path)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errSoakExpired) {
			if err := w.list(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("watcher %d: %w", i, err)
		}
		w.reconnects.Add(1)
	}
	return nil
}

var errSoakExpired = errors.New("resourceVersion expired")

func (w *soakWatcher) list(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", w.s.URL+accWidgets, nil)
	req.Header.Set("Authorization", "Bearer "+w.s.Token)
	resp, err := w.c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	var l struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
		Items    []struct {
			Metadata struct{ Name, ResourceVersion string } `json:"metadata"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return fmt.Errorf("list: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.objects = map[string]int64{}
	for _, it := range l.Items {
		rv, _ := strconv.ParseInt(it.Metadata.ResourceVersion, 10, 64)
		w.objects[it.Metadata.Name] = rv
	}
	w.rv, _ = strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64)
	w.listed = true
	return nil
}

func (w *soakWatcher) watch(ctx context.Context, path string) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", w.s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+w.s.Token)
	resp, err := w.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusGone {
		return errSoakExpired
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("watch: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var ev struct {
			Type   string
			Object struct {
				Code     int                                    `json:"code"`
				Metadata struct{ Name, ResourceVersion string } `json:"metadata"`
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("watch event %.200s: %w", sc.Bytes(), err)
		}
		if ev.Type == "ERROR" {
			if ev.Object.Code == http.StatusGone {
				return errSoakExpired
			}
			return fmt.Errorf("watch ERROR event: %s", sc.Bytes())
		}
		rv, err := strconv.ParseInt(ev.Object.Metadata.ResourceVersion, 10, 64)
		if err != nil {
			return fmt.Errorf("watch event without a resourceVersion: %.200s", sc.Bytes())
		}
		w.mu.Lock()
		if rv < w.rv {
			w.backwards.Add(1)
		}
		w.rv = max(w.rv, rv)
		switch ev.Type {
		case "ADDED", "MODIFIED":
			w.objects[ev.Object.Metadata.Name] = rv
		case "DELETED":
			delete(w.objects, ev.Object.Metadata.Name)
		}
		w.mu.Unlock()
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

// differs tells how the cache differs from want, or "".
func (w *soakWatcher) differs(want map[string]int64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, rv := range want {
		if got, ok := w.objects[name]; !ok {
			return fmt.Sprintf("lacks %s (%d of %d cached)", name, len(w.objects), len(want))
		} else if got != rv {
			return fmt.Sprintf("has %s at %d, the list at %d", name, got, rv)
		}
	}
	for name := range w.objects {
		if _, ok := want[name]; !ok {
			return fmt.Sprintf("still has %s, which is gone", name)
		}
	}
	return ""
}
