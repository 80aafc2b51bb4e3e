package replicas

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// readyWatch follows the objects at a collection path through one
// replica and counts those that ready says are done.
type readyWatch struct {
	mu    sync.Mutex
	ready map[string]bool
	n     int
	done  chan struct{} // closed once n are ready
	err   chan error
}

// watchedObject is what readiness looks at in a Widget or a ReplicaGroup.
type watchedObject struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Replicas *int64 `json:"replicas"`
	} `json:"spec"`
	Status struct {
		State      string `json:"state"`
		Replicas   *int64 `json:"replicas"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

// widgetReady: status.state Ready with a Ready condition, as the widget
// plugin writes once the widget's WidgetProvision exists.
func widgetReady(o *watchedObject) bool {
	if o.Status.State != "Ready" {
		return false
	}
	for _, c := range o.Status.Conditions {
		if c.Type == "Ready" && c.Status == "True" {
			return true
		}
	}
	return false
}

// groupReady: status.state Ready with as many replicas as the spec asks.
func groupReady(o *watchedObject) bool {
	return o.Status.State == "Ready" && o.Spec.Replicas != nil && o.Status.Replicas != nil && *o.Status.Replicas == *o.Spec.Replicas
}

func watchReady(ctx context.Context, c *client, path, rv string, n int, ready func(*watchedObject) bool) (*readyWatch, error) {
	w := &readyWatch{ready: make(map[string]bool, n), n: n, done: make(chan struct{}), err: make(chan error, 1)}
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+path+"?watch=true&resourceVersion="+rv, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("watch: %d %.200s", resp.StatusCode, b)
	}
	go func() {
		defer resp.Body.Close()
		d := json.NewDecoder(bufio.NewReaderSize(resp.Body, 64<<10))
		for {
			var ev struct {
				Type   string        `json:"type"`
				Object watchedObject `json:"object"`
			}
			if err := d.Decode(&ev); err != nil {
				if ctx.Err() == nil {
					w.err <- fmt.Errorf("watch %s: %w", path, err)
				}
				return
			}
			if ev.Type == "ERROR" {
				w.err <- fmt.Errorf("watch %s: an ERROR event (the watch fell behind?)", path)
				return
			}
			if name := ev.Object.Metadata.Name; !w.ready[name] && ready(&ev.Object) {
				w.ready[name] = true
				w.mu.Lock()
				w.n--
				left := w.n
				w.mu.Unlock()
				if left == 0 {
					close(w.done)
				}
			}
		}
	}()
	return w, nil
}

func (w *readyWatch) left() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// installWidget registers the example's kinds and installs the widget
// plugin through the last replica. The replica that installs a plugin
// loads it first and so most often takes its lease: with the first
// replica leading the garbage collector, the controllers spread.
func installWidget(b *testing.B, d *deployment, wasm string) {
	registerWidget(b, d, true)
	installPlugin(b, d, len(d.servers)-1, "widget", wasm, "widgets", "widgetprovisions")
}

// installPlugin installs a plugin through replica via and waits until
// every replica has loaded it (admission runs on each).
func installPlugin(b *testing.B, d *deployment, via int, name, wasm, reconcile, owns string) {
	if out, errOut, err := d.servers[via].Setpoint("plugin", "install", name, "--wasm", wasm, "--reconcile", reconcile, "--owns", owns); err != nil {
		b.Fatalf("%s: setpoint plugin install %s: %v\n%s%s", d.name, name, err, out, errOut)
	}
	metric := fmt.Sprintf("setpoint_plugin_calls_total{plugin=%q}", name)
	for i, c := range d.clients {
		waitFor(b, 2*time.Minute, fmt.Sprintf("%s: the %s plugin loaded on replica %d", d.name, name, i), func() (bool, string) {
			m, err := c.metrics(context.Background())
			if err != nil {
				return false, err.Error()
			}
			return strings.Contains(m, metric), "no " + metric
		})
	}
}

// converged is one convergence measurement.
type converged struct {
	name    string
	n       int
	created time.Duration // to create them all
	ready   time.Duration // from the first create to the last Ready
	cpu     float64       // seconds, the servers' and etcd's
	etcd    float64       // seconds, etcd's part of cpu
	leases  string
}

func (c converged) rate() float64 { return float64(c.n) / c.ready.Seconds() }

// converge creates n Widgets through d's replicas round robin, with the
// widget plugin running, and times until every one is Ready.
func converge(b *testing.B, d *deployment, wasm string, k knobs) converged {
	installWidget(b, d, wasm)
	var ids map[string]int
	if d.etcd != 0 {
		ids = identities(b, d)
	}
	// Every controller has a leader before the clock starts.
	leases := "embedded store: every controller on the one server"
	if ids != nil {
		waitFor(b, time.Minute, d.name+": leaders of the garbage collector and the widget plugin", func() (bool, string) {
			leases = leaders(b, d, ids)
			return strings.Contains(leases, "setpoint-plugin.widget on replica") && strings.Contains(leases, "setpoint-garbage-collector on replica"), leases
		})
	}
	ns := "converge"
	createNamespace(b, d, ns)
	body, err := d.clients[0].expect(context.Background(), http.StatusOK, "GET", widgets(ns)+"?limit=1", "", nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := watchReady(ctx, d.clients[len(d.clients)-1], widgets(ns), listRV(b, body), k.widgets, widgetReady)
	if err != nil {
		b.Fatalf("%s: %v", d.name, err)
	}
	idle := d.settle(b, time.Minute)
	sizes := []string{"small", "medium", "large"}
	cpu0, etcd0 := d.cpu(b), d.etcdCPU(b)
	start := time.Now()
	p := benchtest.Run(k.workers, k.widgets, k.timeout, func(ctx context.Context, i int) error {
		obj := fmt.Appendf(nil, `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w%05d"},"spec":{"name":"Widget %d","size":%q}}`, i, i, sizes[i%3])
		_, err := d.pick(i).expect(ctx, http.StatusCreated, "POST", widgets(ns), "application/json", obj)
		return err
	})
	if p.Err != nil {
		b.Fatalf("%s: create widgets: %v", d.name, p.Err)
	}
	created := time.Since(start)
	select {
	case <-w.done:
	case err := <-w.err:
		b.Fatalf("%s: %v (%d of %d not Ready)", d.name, err, w.left(), k.widgets)
	case <-time.After(k.timeout):
		b.Fatalf("%s: %d of %d widgets not Ready %v after the last create", d.name, w.left(), k.widgets, k.timeout)
	}
	c := converged{name: d.name, n: k.widgets, created: created, ready: time.Since(start), cpu: d.cpu(b) - cpu0, etcd: d.etcdCPU(b) - etcd0, leases: leases}
	if ids != nil {
		c.leases = leaders(b, d, ids)
	}
	b.Logf("%-20s reconciles and retries of the widget controller: %s", d.name, controllerCounts(b, d, "widget"))
	b.Logf("%-20s %d widgets created in %v, all Ready in %v: %.0f objects/s, CPU %.0f µs/object (etcd %.0f; idle before the clock: %.0f%% of a core); leases: %s (load %s)",
		d.name, c.n, c.created.Round(time.Millisecond), c.ready.Round(time.Millisecond), c.rate(), c.cpu/float64(c.n)*1e6, c.etcd/float64(c.n)*1e6, idle*100, c.leases, benchtest.LoadAvg())
	return c
}

// unlimitedWrites lifts the server's limit on each plugin's writes
// (--plugin-write-rate, 100 a second by default, which 10,000 Widgets
// would otherwise measure: past its burst the widget plugin's reconciles
// fail with 429 and back off).
var unlimitedWrites = []string{"--plugin-write-rate", "1000000", "--plugin-write-burst", "1000000"}

// BenchmarkConverge measures the time for WIDGETS Widgets, created
// through the replicas round robin while the widget plugin runs, to become
// Ready: on three replicas on etcd, one replica on etcd and Badger.
func BenchmarkConverge(b *testing.B) {
	k := readKnobs(b)
	wasm := filepath.Join(testserver.ModuleRoot(b), "bin", "wasm", "widget-plugin.wasm")
	if _, err := os.Stat(wasm); err != nil {
		b.Fatalf("%v (run `make plugins`)", err)
	}
	for range b.N {
		b.Logf("%d widgets, created at concurrency %d; load average %s", k.widgets, k.workers, benchtest.LoadAvg())
		e := startEtcd(b)
		var rows []converged
		d := startReplicas(b, "3 replicas on etcd", e.e, e.pid, replicas, "/three", k.workers, unlimitedWrites...)
		rows = append(rows, converge(b, d, wasm, k))
		d.stop(b)
		d = startReplicas(b, "1 replica on etcd", e.e, e.pid, 1, "/one", k.workers, unlimitedWrites...)
		rows = append(rows, converge(b, d, wasm, k))
		d.stop(b)
		d = startBadger(b, k.workers, unlimitedWrites...)
		rows = append(rows, converge(b, d, wasm, k))
		d.stop(b)

		var t strings.Builder
		fmt.Fprintf(&t, "\n| Set-up | Widgets | created in | all Ready in | objects/s | CPU µs/object (etcd) | x Badger | leaders (lease on replica) |\n")
		fmt.Fprintf(&t, "|---|---:|---:|---:|---:|---:|---:|---|\n")
		for _, r := range rows {
			fmt.Fprintf(&t, "| %s | %d | %.1f s | %.1f s | %.0f | %.0f (%.0f) | %.2f | %s |\n", r.name, r.n, r.created.Seconds(), r.ready.Seconds(),
				r.rate(), r.cpu/float64(r.n)*1e6, r.etcd/float64(r.n)*1e6, r.rate()/rows[2].rate(), r.leases)
		}
		b.Logf("convergence of the widget plugin (servers with %s); CPU: servers + etcd; load average %s%s", strings.Join(unlimitedWrites, " "), benchtest.LoadAvg(), t.String())
		b.ReportMetric(rows[0].rate(), "etcd3-obj/s")
		b.ReportMetric(rows[1].rate(), "etcd1-obj/s")
		b.ReportMetric(rows[2].rate(), "badger-obj/s")
	}
}

// controllerCounts sums, over the replicas, the controller name's
// reconciles by result and its work queue's retries, from /metrics.
func controllerCounts(b *testing.B, d *deployment, name string) string {
	sums := map[string]float64{}
	var order []string
	for _, c := range d.clients {
		m, err := c.metrics(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(m, "\n") {
			if !strings.HasPrefix(line, "setpoint_controller_reconcile_total{") && !strings.HasPrefix(line, "setpoint_workqueue_retries_total{") {
				continue
			}
			if !strings.Contains(line, fmt.Sprintf("%q", name)) {
				continue
			}
			i := strings.LastIndexByte(line, ' ')
			var v float64
			if _, err := fmt.Sscan(line[i+1:], &v); err != nil {
				continue
			}
			key := line[:i]
			if _, ok := sums[key]; !ok {
				order = append(order, key)
			}
			sums[key] += v
		}
	}
	if len(order) == 0 {
		return "none in /metrics"
	}
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = fmt.Sprintf("%s %.0f", k, sums[k])
	}
	return strings.Join(out, ", ")
}
