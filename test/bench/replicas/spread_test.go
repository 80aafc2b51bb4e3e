package replicas

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// BenchmarkSpread runs two plugins' controllers at once on three replicas
// on etcd: the widget plugin and the replicagroup plugin
// (examples/replicagroup), SPREAD Widgets and SPREAD ReplicaGroups of one
// replica each created together through the replicas round robin. It runs
// twice on fresh replicas: with both plugins installed through the same
// replica (whose controllers then most often lead both) and through two
// different ones. Which replica wins a lease is not in the benchmark's
// hands: the table says where both plugins' controllers ran and which
// replica held which lease, and the time until every object of both kinds
// is Ready.
func BenchmarkSpread(b *testing.B) {
	k := readKnobs(b)
	n := benchtest.MustEnv(b, knob+"SPREAD", 300)
	root := testserver.ModuleRoot(b)
	widgetWasm := filepath.Join(root, "bin", "wasm", "widget-plugin.wasm")
	groupWasm := filepath.Join(root, "bin", "wasm", "replicagroup-plugin.wasm")
	for _, f := range []string{widgetWasm, groupWasm} {
		if _, err := os.Stat(f); err != nil {
			b.Fatalf("%v (run `make plugins`)", err)
		}
	}
	type result struct {
		name                 string
		leases               string
		apart                bool // the two plugins' leases on different replicas
		widgets, groups, all time.Duration
		cpu                  float64
	}
	for range b.N {
		b.Logf("%d Widgets and %d ReplicaGroups at once, created at concurrency %d; load average %s", n, n, k.workers, benchtest.LoadAvg())
		e := startEtcd(b)
		var rows []result
		for _, pl := range []struct {
			name                string
			widgetVia, groupVia int
		}{{"same replica", 2, 2}, {"different replicas", 1, 2}} {
			d := startReplicas(b, "3 replicas, plugins installed through "+pl.name, e.e, e.pid, replicas, "/spread-"+strings.ReplaceAll(pl.name, " ", "-"), k.workers, unlimitedWrites...)
			registerKinds(b, d, []string{"examples/widget/crd.yaml", "examples/widget/provision-crd.yaml",
				"examples/replicagroup/crd.yaml", "examples/replicagroup/replica-crd.yaml"},
				[]string{"widgets", "widgetprovisions", "replicagroups", "replicas"})
			installPlugin(b, d, pl.widgetVia, "widget", widgetWasm, "widgets", "widgetprovisions")
			installPlugin(b, d, pl.groupVia, "replicagroup", groupWasm, "replicagroups", "replicas")
			ids := identities(b, d)
			var leases string
			waitFor(b, time.Minute, d.name+": leaders of both plugins", func() (bool, string) {
				leases = leaders(b, d, ids)
				return strings.Contains(leases, "setpoint-plugin.widget on replica") && strings.Contains(leases, "setpoint-plugin.replicagroup on replica"), leases
			})

			ns := "spread"
			createNamespace(b, d, ns)
			groups := group + "/namespaces/" + ns + "/replicagroups"
			ctx, cancel := context.WithCancel(context.Background())
			var watches []*readyWatch
			for _, w := range []struct {
				path  string
				ready func(*watchedObject) bool
			}{{widgets(ns), widgetReady}, {groups, groupReady}} {
				body, err := d.clients[0].expect(ctx, http.StatusOK, "GET", w.path+"?limit=1", "", nil)
				if err != nil {
					b.Fatal(err)
				}
				rw, err := watchReady(ctx, d.clients[0], w.path, listRV(b, body), n, w.ready)
				if err != nil {
					b.Fatalf("%s: %v", d.name, err)
				}
				watches = append(watches, rw)
			}
			idle := d.settle(b, time.Minute)
			cpu0 := d.cpu(b)
			start := time.Now()
			p := benchtest.Run(k.workers, 2*n, k.timeout, func(ctx context.Context, i int) error {
				path, obj := widgets(ns), fmt.Appendf(nil, `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w%05d"},"spec":{"name":"Widget %d","size":"small"}}`, i/2, i/2)
				if i%2 == 1 {
					path, obj = groups, fmt.Appendf(nil, `{"apiVersion":"example.setpoint.dev/v1","kind":"ReplicaGroup","metadata":{"name":"g%05d"},"spec":{"replicas":1,"message":"m"}}`, i/2)
				}
				_, err := d.pick(i).expect(ctx, http.StatusCreated, "POST", path, "application/json", obj)
				return err
			})
			if p.Err != nil {
				b.Fatalf("%s: create: %v", d.name, p.Err)
			}
			r := result{name: pl.name}
			deadline := time.After(k.timeout)
			wdone, gdone := watches[0].done, watches[1].done
			for wdone != nil || gdone != nil {
				select {
				case <-wdone:
					r.widgets, wdone = time.Since(start), nil
				case <-gdone:
					r.groups, gdone = time.Since(start), nil
				case err := <-watches[0].err:
					b.Fatalf("%s: %v", d.name, err)
				case err := <-watches[1].err:
					b.Fatalf("%s: %v", d.name, err)
				case <-deadline:
					b.Fatalf("%s: %d Widgets and %d ReplicaGroups not Ready %v after the first create", d.name, watches[0].left(), watches[1].left(), k.timeout)
				}
			}
			r.all = max(r.widgets, r.groups)
			r.cpu = d.cpu(b) - cpu0
			r.leases = leaders(b, d, ids)
			r.apart = holder(r.leases, "setpoint-plugin.widget") != holder(r.leases, "setpoint-plugin.replicagroup")
			cancel()
			b.Logf("%s: Widgets Ready in %v, ReplicaGroups in %v: %.0f objects/s, CPU %.0f µs/object (idle before the clock: %.0f%% of a core); leases: %s (load %s)",
				d.name, r.widgets.Round(time.Millisecond), r.groups.Round(time.Millisecond), float64(2*n)/r.all.Seconds(), r.cpu/float64(2*n)*1e6, idle*100, r.leases, benchtest.LoadAvg())
			rows = append(rows, r)
			d.stop(b)
		}
		var t strings.Builder
		fmt.Fprintf(&t, "\n| Plugins installed through | plugin controllers on different replicas | leaders (lease on replica) | Widgets Ready in | ReplicaGroups Ready in | objects/s | CPU µs/object | x same replica |\n")
		fmt.Fprintf(&t, "|---|---|---|---:|---:|---:|---:|---:|\n")
		for _, r := range rows {
			fmt.Fprintf(&t, "| %s | %s | %s | %.1f s | %.1f s | %.0f | %.0f | %.2f |\n", r.name, yesNo(r.apart), r.leases, r.widgets.Seconds(), r.groups.Seconds(),
				float64(2*n)/r.all.Seconds(), r.cpu/float64(2*n)*1e6, rows[0].all.Seconds()/r.all.Seconds())
		}
		b.Logf("two plugins converging at once on 3 replicas on etcd: %d Widgets + %d ReplicaGroups; load average %s%s", n, n, benchtest.LoadAvg(), t.String())
		b.ReportMetric(float64(2*n)/rows[0].all.Seconds(), "same-obj/s")
		b.ReportMetric(float64(2*n)/rows[1].all.Seconds(), "spread-obj/s")
	}
}

// holder is the replica that leaders' answer names for lease.
func holder(leases, lease string) string {
	for _, l := range strings.Split(leases, ", ") {
		if h, ok := strings.CutPrefix(l, lease+" on "); ok {
			return h
		}
	}
	return ""
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
