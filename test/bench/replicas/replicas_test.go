// Package replicas benchmarks Setpoint on etcd (`make bench-replicas`):
// one server on the embedded Badger store, one replica on etcd and three
// replicas on one etcd, each next to raw etcd in the same run.
//
// BenchmarkReplicas measures, for each set-up in turn (the others
// stopped):
//
//   - creates/s: durable creates of 1 KiB Widgets (examples/widget/crd.yaml)
//     at concurrency 64 (CONCURRENCY), over HTTPS with keep-alive
//     connections, request i through replica i mod replicas; next to raw
//     etcd Puts of 1 KiB values through go.etcd.io/etcd/client/v3 at the
//     same concurrency against the same etcd (measured before each etcd
//     set-up; the table has their mean);
//   - watch fan-out: WATCHERS HTTP watchers of one namespace's Widgets
//     (one connection each, spread over the replicas round robin) while
//     UPDATES merge patches, 8 at a time through the replicas round robin,
//     change an annotation that carries the write's start time: events
//     delivered per second (first write to last delivery) and the latency
//     from a write's start to each delivery; next to as many raw etcd
//     watchers of a prefix receiving as many Puts. The writes are closed
//     loop, so events/s is updates/s times the watchers while none falls
//     behind; a watch the server ends (too slow to keep up) is counted.
//
// The CPU per operation is the servers' and, on etcd, etcd's own (also
// shown apart), read from /proc/PID/stat before and after each phase, so
// it does not depend on how much of a shared machine the others leave.
//
// BenchmarkConverge (converge_test.go) measures the time for WIDGETS
// Widgets to become Ready through the widget plugin on three replicas,
// one replica and Badger, and which replica leads which Lease.
// BenchmarkSpread (spread_test.go) converges two plugins' kinds at once on
// three replicas, with both controllers on one replica and then on two.
//
// The knobs are environment variables: SETPOINT_BENCH_REPLICAS_CREATES,
// _WATCHERS, _UPDATES, _WIDGETS, _SPREAD, _CONCURRENCY and _TIMEOUT
// (seconds per phase); the defaults are small, `make bench-replicas` sets
// the figures' sizes. Everything the benchmarks start is stopped by b.Cleanup
// (testserver and etcdtest kill their process groups), on loopback only,
// and every phase gives up after its timeout.
package replicas

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
)

const (
	objectSize = 1024
	annotation = "bench.setpoint.dev/pad"
	knob       = "SETPOINT_BENCH_REPLICAS_"
	replicas   = 3
)

// widget is a Widget's JSON, padded with an annotation to exactly size
// bytes, as test/bench/api creates.
func widget(name string, size int) []byte {
	head := fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":%q,"annotations":{%q:"`, name, annotation)
	tail := fmt.Sprintf(`"}},"spec":{"name":%q,"size":"medium","color":"blue"}}`, name)
	return []byte(head + strings.Repeat("x", max(size-len(head)-len(tail), 0)) + tail)
}

// knobs are the benchmarks' sizes.
type knobs struct {
	creates, watchers, updates, widgets, workers int
	timeout                                      time.Duration
}

func readKnobs(b *testing.B) knobs {
	return knobs{
		creates:  benchtest.MustEnv(b, knob+"CREATES", 2000),
		watchers: benchtest.MustEnv(b, knob+"WATCHERS", 50),
		updates:  benchtest.MustEnv(b, knob+"UPDATES", 200),
		widgets:  benchtest.MustEnv(b, knob+"WIDGETS", 300),
		workers:  benchtest.MustEnv(b, knob+"CONCURRENCY", 64),
		timeout:  time.Duration(benchtest.MustEnv(b, knob+"TIMEOUT", 600)) * time.Second,
	}
}

func newEtcdClient(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// etcdBase is the etcd every etcd set-up runs on, and the raw client of
// the baseline.
type etcdBase struct {
	e        *etcdtest.Server
	endpoint string
	pid      int
	client   *clientv3.Client
}

func startEtcd(b *testing.B) *etcdBase {
	e := etcdtest.Start(b, etcdtest.Options{})
	c, err := newEtcdClient(e.Endpoint)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return &etcdBase{e: e, endpoint: e.Endpoint, pid: etcdPID(b, e), client: c}
}

func (e *etcdBase) cpu(b *testing.B) float64 {
	s, err := benchtest.ProcessCPU(e.pid)
	if err != nil {
		b.Fatalf("etcd's CPU: %v", err)
	}
	return s
}

// puts writes n values under prefix, workers at a time.
func (e *etcdBase) puts(workers, n int, prefix, value string, timeout time.Duration) benchtest.Phase {
	return benchtest.Run(workers, n, timeout, func(ctx context.Context, i int) error {
		_, err := e.client.Put(ctx, fmt.Sprintf("%s%07d", prefix, i), value)
		return err
	})
}

// measured is a phase with the CPU the serving processes spent on it.
type measured struct {
	p         benchtest.Phase
	cpu, etcd float64 // seconds: all serving processes', etcd's part
}

func (m measured) cpuPerOp() float64  { return m.cpu / float64(m.p.Ops) * 1e6 }
func (m measured) etcdPerOp() float64 { return m.etcd / float64(m.p.Ops) * 1e6 }

// rawPuts measures raw etcd Puts of 1 KiB values after a warm-up.
func rawPuts(b *testing.B, e *etcdBase, k knobs, round int) measured {
	value := strings.Repeat("x", objectSize)
	if p := e.puts(k.workers, k.creates/5+1, fmt.Sprintf("/warm-%d/", round), value, k.timeout); p.Err != nil {
		b.Fatalf("warm-up Puts: %v", p.Err)
	}
	c0 := e.cpu(b)
	p := e.puts(k.workers, k.creates, fmt.Sprintf("/raw-%d/", round), value, k.timeout)
	if p.Err != nil {
		b.Fatalf("etcd Puts: %v", p.Err)
	}
	m := measured{p: p, cpu: e.cpu(b) - c0}
	m.etcd = m.cpu
	b.Logf("raw etcd Put (1 KiB)    %6d in %8v: %7.0f/s  p50 %s  p99 %s  etcd CPU %4.0f µs/op  (load %s)",
		p.Ops, p.Elapsed.Round(time.Millisecond), p.Rate(), ms(p.Quantile(0.5)), ms(p.Quantile(0.99)), m.cpuPerOp(), benchtest.LoadAvg())
	return m
}

// creates measures 1 KiB Widget creates through d after a warm-up.
func creates(b *testing.B, d *deployment, k knobs) measured {
	registerWidget(b, d, false)
	createNamespace(b, d, "warm")
	createNamespace(b, d, "bench")
	run := func(ns string, n int) benchtest.Phase {
		return benchtest.Run(k.workers, n, k.timeout, func(ctx context.Context, i int) error {
			_, err := d.pick(i).expect(ctx, http.StatusCreated, "POST", widgets(ns), "application/json", widget(fmt.Sprintf("w%07d", i), objectSize))
			return err
		})
	}
	if p := run("warm", k.creates/5+1); p.Err != nil {
		b.Fatalf("%s: warm-up creates: %v", d.name, p.Err)
	}
	b.Logf("%-23s idle: %.0f%% of a core", d.name, d.idle(b, 2*time.Second)*100)
	c0, e0 := d.cpu(b), d.etcdCPU(b)
	p := run("bench", k.creates)
	if p.Err != nil {
		b.Fatalf("%s: creates: %v", d.name, p.Err)
	}
	m := measured{p: p, cpu: d.cpu(b) - c0, etcd: d.etcdCPU(b) - e0}
	b.Logf("%-23s %6d in %8v: %7.0f/s  p50 %s  p99 %s  CPU %4.0f µs/op (etcd %.0f)  (load %s)",
		d.name+" create", p.Ops, p.Elapsed.Round(time.Millisecond), p.Rate(), ms(p.Quantile(0.5)), ms(p.Quantile(0.99)), m.cpuPerOp(), m.etcdPerOp(), benchtest.LoadAvg())
	return m
}

func logFan(b *testing.B, name string, r fanResult) {
	b.Logf("%-23s %d watchers x %d updates (%.0f updates/s): %d deliveries in %v: %7.0f/s  p50 %s  p99 %s  CPU %.1f µs/delivery (etcd %.1f); %d watches ended early  (load %s)",
		name+" watch", r.watchers, r.updates, r.writes.Rate(), r.delivered, r.elapsed.Round(time.Millisecond), r.rate(),
		ms(r.p50), ms(r.p99), r.cpu/float64(r.delivered)*1e6, r.etcdCPU/float64(r.delivered)*1e6, r.closed, benchtest.LoadAvg())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// BenchmarkReplicas measures creates/s and watch fan-out on Badger, one
// replica on etcd and three replicas on etcd, next to raw etcd.
func BenchmarkReplicas(b *testing.B) {
	k := readKnobs(b)
	const fanWriters, fanObjects = 8, 100
	for range b.N {
		b.Logf("GOMAXPROCS %d, %d CPUs, load average %s; %d creates at concurrency %d; fan-out %d watchers x %d updates",
			runtime.GOMAXPROCS(0), runtime.NumCPU(), benchtest.LoadAvg(), k.creates, k.workers, k.watchers, k.updates)
		e := startEtcd(b)
		type row struct {
			name   string
			create measured
			fan    fanResult
		}
		var rows []row

		d := startBadger(b, k.workers)
		rows = append(rows, row{name: "Badger (1 server)", create: creates(b, d, k)})
		rows[len(rows)-1].fan = fanoutAPI(b, d, k.watchers, k.updates, fanWriters, fanObjects, k.timeout)
		logFan(b, d.name, rows[len(rows)-1].fan)
		d.stop(b)

		raw1 := rawPuts(b, e, k, 1)
		d = startReplicas(b, "1 replica on etcd", e.e, e.pid, 1, "/one", k.workers)
		rows = append(rows, row{name: d.name, create: creates(b, d, k)})
		rows[len(rows)-1].fan = fanoutAPI(b, d, k.watchers, k.updates, fanWriters, fanObjects, k.timeout)
		logFan(b, d.name, rows[len(rows)-1].fan)
		d.stop(b)

		raw2 := rawPuts(b, e, k, 2)
		d = startReplicas(b, "3 replicas on etcd", e.e, e.pid, replicas, "/three", k.workers)
		rows = append(rows, row{name: d.name, create: creates(b, d, k)})
		rows[len(rows)-1].fan = fanoutAPI(b, d, k.watchers, k.updates, fanWriters, fanObjects, k.timeout)
		logFan(b, d.name, rows[len(rows)-1].fan)
		d.stop(b)

		rawFan := fanoutEtcd(b, e, k.watchers, k.updates, fanWriters, fanObjects, k.timeout)
		logFan(b, "raw etcd", rawFan)

		// The raw Put row is the mean of its two measurements.
		raw := measured{p: benchtest.Phase{
			Ops:     raw1.p.Ops + raw2.p.Ops,
			Elapsed: raw1.p.Elapsed + raw2.p.Elapsed,
			Lat:     mergeSorted(raw1.p.Lat, raw2.p.Lat),
		}, cpu: raw1.cpu + raw2.cpu, etcd: raw1.etcd + raw2.etcd}
		rows = append(rows, row{name: "raw etcd (Put / watch)", create: raw, fan: rawFan})

		badger, base := rows[0], rows[len(rows)-1]
		var t strings.Builder
		fmt.Fprintf(&t, "\n| Set-up | creates/s | create p99 | CPU µs/create (etcd) | x raw Put | x Badger | updates/s | events/s | delivery p99 | CPU µs/event (etcd) | x raw watch | x Badger | watches ended early |\n")
		fmt.Fprintf(&t, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range rows {
			fmt.Fprintf(&t, "| %s | %.0f | %s | %.0f (%.0f) | %.2f | %.2f | %.0f | %.0f | %s | %.1f (%.1f) | %.2f | %.2f | %d |\n",
				r.name, r.create.p.Rate(), ms(r.create.p.Quantile(0.99)), r.create.cpuPerOp(), r.create.etcdPerOp(),
				r.create.p.Rate()/base.create.p.Rate(), r.create.p.Rate()/badger.create.p.Rate(),
				r.fan.writes.Rate(), r.fan.rate(), ms(r.fan.p99), r.fan.cpu/float64(r.fan.delivered)*1e6, r.fan.etcdCPU/float64(r.fan.delivered)*1e6,
				r.fan.rate()/base.fan.rate(), r.fan.rate()/badger.fan.rate(), r.fan.closed)
		}
		b.Logf("creates: %d at concurrency %d; fan-out: %d watchers, %d updates (%d writers); CPU: servers + etcd; load average %s%s",
			k.creates, k.workers, k.watchers, k.updates, fanWriters, benchtest.LoadAvg(), t.String())
		for i, tag := range []string{"badger", "etcd1", "etcd3"} {
			b.ReportMetric(rows[i].create.p.Rate(), tag+"-creates/s")
			b.ReportMetric(rows[i].fan.rate(), tag+"-events/s")
		}
		b.ReportMetric(base.create.p.Rate(), "raw-puts/s")
		b.ReportMetric(base.fan.rate(), "raw-events/s")
	}
}

func mergeSorted(a, c []time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(a)+len(c))
	i, j := 0, 0
	for i < len(a) || j < len(c) {
		if j >= len(c) || (i < len(a) && a[i] <= c[j]) {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, c[j])
			j++
		}
	}
	return out
}
