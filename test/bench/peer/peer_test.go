// Package peer benchmarks Setpoint against what its users would otherwise
// run, kube-apiserver on etcd (`make bench-peer`), on the same client-go
// workload, and prints each figure side by side with its ratio.
//
// Each side is started alone on loopback ports (Setpoint from SETPOINT_BIN
// or the harness's build; kube-apiserver v1.34.4 on a one-member etcd
// v3.6.4, from KUBE_APISERVER_BIN and ETCD_BIN or the cache folder that
// build-peer.sh fills), is given the same Widget CRD, is warmed up with
// WARMUP creates and GETs in a namespace of their own, and then measured:
//
//   - time to ready: from starting the first process to /readyz 200;
//   - creates/s of OBJECTS 1 KiB Widgets at CONCURRENCY (64), and GETs/s of
//     GETS of them, with the server's CPU per operation;
//   - the time to LIST all OBJECTS in one request and in pages of 500
//     (median of three);
//   - watch fan-out: for each count in WATCHERS (200 and 2,000), that many
//     chunked HTTP watches through one client-go transport receive
//     WATCH_UPDATES patches written by WATCH_WRITERS goroutines; events
//     delivered per second, write-to-receipt p99 and server CPU per
//     delivered event;
//   - resident memory after the run and the data on disk after stop.
//
// Server CPU is read from /proc/PID/stat, kube-apiserver's and etcd's
// counted together. Writes and reads use client-go's dynamic client; LISTs
// and watches use its REST client and transport without decoding, so the
// client's CPU (which shares the machine) stays small and equal for both.
// SIDES=setpoint or SIDES=peer measures one side only; every phase gives up
// after PHASE_TIMEOUT seconds.
package peer

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
)

// result is what one side measured.
type result struct {
	name        string
	ready       time.Duration
	crd         time.Duration
	create, get measured
	list, paged time.Duration
	watch       []fanOut
	rss, disk   float64
	objects     int
	ran         bool
}

type knobs struct {
	concurrency, objects, gets, warmup int
	watchers                           []int
	updates, writers, watchObjects     int
	timeout                            time.Duration
	setpoint, peer                     bool
}

func readKnobs(b *testing.B) knobs {
	k := knobs{
		concurrency:  benchtest.MustEnv(b, "CONCURRENCY", 64),
		objects:      benchtest.MustEnv(b, "OBJECTS", 5000),
		gets:         benchtest.MustEnv(b, "GETS", 10000),
		warmup:       benchtest.MustEnv(b, "WARMUP", 500),
		updates:      benchtest.MustEnv(b, "WATCH_UPDATES", 500),
		writers:      benchtest.MustEnv(b, "WATCH_WRITERS", 4),
		watchObjects: benchtest.MustEnv(b, "WATCH_OBJECTS", 100),
		timeout:      time.Duration(benchtest.MustEnv(b, "PHASE_TIMEOUT", 120)) * time.Second,
		watchers:     []int{200, 2000},
	}
	if v := os.Getenv("WATCHERS"); v != "" {
		k.watchers = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("WATCHERS=%q: want positive integers separated by commas", v)
			}
			k.watchers = append(k.watchers, n)
		}
	}
	switch v := os.Getenv("SIDES"); v {
	case "", "setpoint,peer", "peer,setpoint":
		k.setpoint, k.peer = true, true
	case "setpoint":
		k.setpoint = true
	case "peer":
		k.peer = true
	default:
		b.Fatalf("SIDES=%q: want setpoint, peer or both", v)
	}
	k.watchObjects = min(k.watchObjects, k.objects)
	return k
}

func BenchmarkPeer(b *testing.B) {
	k := readKnobs(b)
	for range b.N {
		b.Logf("GOMAXPROCS %d, load average %s; %d objects, %d GETs at concurrency %d; watchers %v x %d updates from %d writers",
			runtime.GOMAXPROCS(0), benchtest.LoadAvg(), k.objects, k.gets, k.concurrency, k.watchers, k.updates, k.writers)
		var sp, peer result
		if k.setpoint {
			sp = measure(b, k, startSetpoint(b, 2*slices.Max(k.watchers)))
		}
		if k.peer {
			peer = measure(b, k, startPeer(b))
		}
		printTable(b, sp, peer)
	}
}

// measure runs the workload against s, stops it and returns the figures.
func measure(b *testing.B, k knobs, s *server) result {
	b.Helper()
	r := result{name: s.name, ready: s.ready, objects: k.objects, ran: true}
	b.Logf("%s: ready in %v (load average %s)", s.name, s.ready.Round(time.Millisecond), benchtest.LoadAvg())
	w := newWorkload(b, s, k.timeout)
	r.crd = w.installCRD()
	b.Logf("%s: Widgets served %v after the CRD was created", s.name, r.crd.Round(time.Millisecond))
	w.warmUp(k.warmup, k.concurrency)
	r.create = w.creates(k.concurrency, k.objects)
	r.get = w.gets(k.concurrency, k.gets, k.objects)
	r.list = w.list(0, k.objects)
	r.paged = w.list(pageLimit, k.objects)
	for _, n := range k.watchers {
		r.watch = append(r.watch, w.watch(n, k.updates, k.writers, k.watchObjects))
	}
	r.rss = s.rss(b)
	s.stop()
	var err error
	if r.disk, err = diskBytes(s.dataDir); err != nil {
		b.Fatalf("%s: data on disk: %v", s.name, err)
	}
	b.Logf("%s: RSS after the run %.1f MiB, data on disk %.1f MiB (load average %s)",
		s.name, r.rss/(1<<20), r.disk/(1<<20), benchtest.LoadAvg())
	return r
}

// row is one line of the table: a figure of each side and which way is
// better.
type row struct {
	label, unit, metric string
	higherIsBetter      bool
	sp, peer            float64
}

func rows(sp, peer result) []row {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	n := max(sp.objects, peer.objects)
	rs := []row{
		{label: "time to ready", unit: "ms", metric: "ready", sp: ms(sp.ready), peer: ms(peer.ready)},
		{label: "CRD created to Widgets served", unit: "ms", metric: "crd-served", sp: ms(sp.crd), peer: ms(peer.crd)},
		{label: "creates/s at c64", unit: "/s", metric: "creates/s", higherIsBetter: true, sp: sp.create.rate, peer: peer.create.rate},
		{label: "server CPU per create", unit: "µs", metric: "cpu/create", sp: sp.create.cpuUS, peer: peer.create.cpuUS},
		{label: "create p99", unit: "ms", metric: "create-p99", sp: ms(sp.create.p99), peer: ms(peer.create.p99)},
		{label: "GETs/s at c64", unit: "/s", metric: "gets/s", higherIsBetter: true, sp: sp.get.rate, peer: peer.get.rate},
		{label: "server CPU per GET", unit: "µs", metric: "cpu/get", sp: sp.get.cpuUS, peer: peer.get.cpuUS},
		{label: fmt.Sprintf("LIST of %d (time)", n), unit: "ms", metric: "list", sp: ms(sp.list), peer: ms(peer.list)},
		{label: fmt.Sprintf("paged LIST of %d, limit %d (time)", n, pageLimit), unit: "ms", metric: "paged-list", sp: ms(sp.paged), peer: ms(peer.paged)},
	}
	for i := range max(len(sp.watch), len(peer.watch)) {
		var a, p fanOut
		if i < len(sp.watch) {
			a = sp.watch[i]
		}
		if i < len(peer.watch) {
			p = peer.watch[i]
		}
		nw, nu := max(a.watchers, p.watchers), max(a.updates, p.updates)
		tag := fmt.Sprintf("watch %d x %d", nw, nu)
		rs = append(rs,
			row{label: tag + ": events/s", unit: "/s", metric: fmt.Sprintf("events/s@%d", nw), higherIsBetter: true, sp: a.rate, peer: p.rate},
			row{label: tag + ": delivery p99", unit: "ms", metric: fmt.Sprintf("p99@%d", nw), sp: ms(a.p99), peer: ms(p.p99)},
			row{label: tag + ": server CPU per event", unit: "µs", metric: fmt.Sprintf("cpu/event@%d", nw), sp: a.cpuUS, peer: p.cpuUS},
			row{label: tag + ": events missing", unit: "", metric: fmt.Sprintf("missing@%d", nw),
				sp: float64(a.want - a.delivered), peer: float64(p.want - p.delivered)},
		)
	}
	rs = append(rs,
		row{label: "RSS after the run", unit: "MiB", metric: "rss", sp: sp.rss / (1 << 20), peer: peer.rss / (1 << 20)},
		row{label: "data on disk", unit: "MiB", metric: "disk", sp: sp.disk / (1 << 20), peer: peer.disk / (1 << 20)},
	)
	return rs
}

// printTable prints the figures as a Markdown table, Setpoint's over the
// peer's as the ratio, and reports the ratios as benchmark metrics.
func printTable(b *testing.B, sp, peer result) {
	var t strings.Builder
	fmt.Fprintf(&t, "\nSetpoint vs kube-apiserver %s + etcd (load average %s)\n\n", peerVersion, benchtest.LoadAvg())
	fmt.Fprintf(&t, "| operation | Setpoint | kube-apiserver+etcd | Setpoint / peer | better |\n|---|---|---|---|---|\n")
	for _, r := range rows(sp, peer) {
		ratio := "-"
		if sp.ran && peer.ran && r.peer != 0 {
			ratio = fmt.Sprintf("%.2fx", r.sp/r.peer)
			b.ReportMetric(r.sp/r.peer, "ratio-"+r.metric)
		}
		better := "lower"
		if r.higherIsBetter {
			better = "higher"
		}
		fmt.Fprintf(&t, "| %s | %s | %s | %s | %s |\n", r.label, figure(sp.ran, r.sp, r.unit), figure(peer.ran, r.peer, r.unit), ratio, better)
	}
	if sp.ran && peer.ran {
		t.WriteString("\nwatch goals (server CPU per event <= 0.5x the peer's; events/s and p99 at least as good):\n")
		for i := range min(len(sp.watch), len(peer.watch)) {
			a, p := sp.watch[i], peer.watch[i]
			fmt.Fprintf(&t, "  %d watchers: CPU/event %.2fx (%s), events/s %.2fx (%s), p99 %.2fx (%s)\n", a.watchers,
				a.cpuUS/p.cpuUS, verdict(a.cpuUS <= 0.5*p.cpuUS),
				a.rate/p.rate, verdict(a.rate >= p.rate),
				float64(a.p99)/float64(p.p99), verdict(a.p99 <= p.p99))
		}
	}
	fmt.Print(t.String())
}

func figure(ok bool, v float64, unit string) string {
	switch {
	case !ok:
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}
