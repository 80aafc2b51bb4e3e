package replicas

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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

// readyWatch follows the Widgets of ns through one replica and counts
// those whose status is Ready with a Ready condition.
type readyWatch struct {
	mu    sync.Mutex
	ready map[string]bool
	n     int
	done  chan struct{} // closed once n are Ready
	err   chan error
}

type widgetEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Status struct {
			State      string `json:"state"`
			Conditions []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"object"`
}

func watchReady(ctx context.Context, c *client, ns, rv string, n int) (*readyWatch, error) {
	w := &readyWatch{ready: make(map[string]bool, n), n: n, done: make(chan struct{}), err: make(chan error, 1)}
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+widgets(ns)+"?watch=true&resourceVersion="+rv, nil)
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
			var ev widgetEvent
			if err := d.Decode(&ev); err != nil {
				if ctx.Err() == nil {
					w.err <- fmt.Errorf("watch: %w", err)
				}
				return
			}
			if ev.Type == "ERROR" {
				w.err <- errors.New("watch: an ERROR event (the watch fell behind?)")
				return
			}
			if ev.Object.Status.State != "Ready" {
				continue
			}
			for _, cond := range ev.Object.Status.Conditions {
				if cond.Type == "Ready" && cond.Status == "True" {
					if !w.ready[ev.Object.Metadata.Name] {
						w.ready[ev.Object.Metadata.Name] = true
						w.mu.Lock()
						w.n--
						left := w.n
						w.mu.Unlock()
						if left == 0 {
							close(w.done)
						}
					}
					break
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
// plugin through the last replica, then waits until every replica has
// loaded it (admission runs on each). The replica that installs the plugin
// loads it first and so most often takes its lease: with the first
// replica leading the garbage collector, the controllers spread.
func installWidget(b *testing.B, d *deployment, wasm string) {
	registerWidget(b, d, true)
	s := d.servers[len(d.servers)-1]
	if out, errOut, err := s.Setpoint("plugin", "install", "widget", "--wasm", wasm, "--reconcile", "widgets", "--owns", "widgetprovisions"); err != nil {
		b.Fatalf("%s: setpoint plugin install: %v\n%s%s", d.name, err, out, errOut)
	}
	for i, c := range d.clients {
		waitFor(b, 2*time.Minute, fmt.Sprintf("%s: the widget plugin loaded on replica %d", d.name, i), func() (bool, string) {
			m, err := c.metrics(context.Background())
			if err != nil {
				return false, err.Error()
			}
			return strings.Contains(m, `setpoint_plugin_calls_total{plugin="widget"}`), "no setpoint_plugin_calls_total of the widget plugin"
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
	leases  string
}

func (c converged) rate() float64 { return float64(c.n) / c.ready.Seconds() }

// converge creates n Widgets through d's replicas round robin, with the
// widget plugin running, and times until every one is Ready.
func converge(b *testing.B, d *deployment, wasm string, k knobs) converged {
	installWidget(b, d, wasm)
	var ids map[string]int
	if len(d.servers) > 1 || len(d.pids) > len(d.servers) {
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
	w, err := watchReady(ctx, d.clients[len(d.clients)-1], ns, listRV(b, body), k.widgets)
	if err != nil {
		b.Fatalf("%s: %v", d.name, err)
	}
	idle := d.idle(b, 2*time.Second)
	sizes := []string{"small", "medium", "large"}
	cpu0 := d.cpu(b)
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
	c := converged{name: d.name, n: k.widgets, created: created, ready: time.Since(start), cpu: d.cpu(b) - cpu0, leases: leases}
	if ids != nil {
		c.leases = leaders(b, d, ids)
	}
	b.Logf("%-20s %d widgets created in %v, all Ready in %v: %.0f objects/s, CPU %.0f µs/object (idle before: %.0f%% of a core); leases: %s (load %s)",
		d.name, c.n, c.created.Round(time.Millisecond), c.ready.Round(time.Millisecond), c.rate(), c.cpu/float64(c.n)*1e6, idle*100, c.leases, benchtest.LoadAvg())
	return c
}

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
		d := startReplicas(b, "3 replicas on etcd", e.e, e.pid, replicas, "/three", k.workers)
		rows = append(rows, converge(b, d, wasm, k))
		d.stop(b)
		d = startReplicas(b, "1 replica on etcd", e.e, e.pid, 1, "/one", k.workers)
		rows = append(rows, converge(b, d, wasm, k))
		d.stop(b)
		d = startBadger(b, k.workers)
		rows = append(rows, converge(b, d, wasm, k))
		d.stop(b)

		var t strings.Builder
		fmt.Fprintf(&t, "\n| Set-up | Widgets | created in | all Ready in | objects/s | CPU µs/object | x Badger | leaders (lease on replica) |\n")
		fmt.Fprintf(&t, "|---|---:|---:|---:|---:|---:|---:|---|\n")
		for _, r := range rows {
			fmt.Fprintf(&t, "| %s | %d | %.1f s | %.1f s | %.0f | %.0f | %.2f | %s |\n", r.name, r.n, r.created.Seconds(), r.ready.Seconds(),
				r.rate(), r.cpu/float64(r.n)*1e6, r.rate()/rows[2].rate(), r.leases)
		}
		b.Logf("convergence of the widget plugin; CPU: servers + etcd; load average %s%s", benchtest.LoadAvg(), t.String())
		b.ReportMetric(rows[0].rate(), "etcd3-obj/s")
		b.ReportMetric(rows[1].rate(), "etcd1-obj/s")
		b.ReportMetric(rows[2].rate(), "badger-obj/s")
	}
}
