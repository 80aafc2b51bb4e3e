package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// pointDuration is how long each measured point runs.
const pointDuration = 3 * time.Second

// value1K is a 1 KiB JSON document.
var value1K = []byte(`{"pad":"` + strings.Repeat("x", 1024-10) + `"}`)

type result struct {
	ops      int
	elapsed  time.Duration
	p50, p99 time.Duration
	cpu      time.Duration // the process's CPU (user and system) over the point
}

// cpuPerOp is the process's CPU per write, in µs.
func (r result) cpuPerOp() float64 { return float64(r.cpu.Microseconds()) / float64(max(r.ops, 1)) }

func (r result) perSec() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// drive runs write from c goroutines for pointDuration and measures each call.
func drive(b *testing.B, c int, write func(g, n int) error) result {
	var wg sync.WaitGroup
	lat := make([][]time.Duration, c)
	deadline := time.Now().Add(pointDuration)
	start := time.Now()
	cpu0 := processCPU()
	var failed atomic.Value
	for g := range c {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				t0 := time.Now()
				if err := write(g, n); err != nil {
					failed.Store(err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	return result{ops: len(all), elapsed: elapsed, p50: quantile(all, 0.50), p99: quantile(all, 0.99), cpu: cpu}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)]
}

func benchKey(g, n int) string {
	return store.ObjectKey("bench.setpoint.dev", "widgets", "default", "w-"+strconv.Itoa(g)+"-"+strconv.Itoa(n))
}

func storeCreates(b *testing.B, c int) result {
	db, err := badger.Open(b.TempDir(), badger.Options{CompactionInterval: -1, ValueLogGCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	return drive(b, c, func(g, n int) error {
		_, err := db.Create(ctx, benchKey(g, n), value1K)
		return err
	})
}

// baselineCreates is plain Badger with SyncWrites: one transaction per write.
func baselineCreates(b *testing.B, c int) result {
	db, err := bdg.Open(bdg.DefaultOptions(b.TempDir()).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	return drive(b, c, func(g, n int) error {
		return db.Update(func(txn *bdg.Txn) error { return txn.Set([]byte(benchKey(g, n)), value1K) })
	})
}

// BenchmarkDurableCreates prints durable 1 KiB creates per second, latency
// and the process's CPU per create for the store and for plain Badger, at
// concurrency 1, 16 and 64.
func BenchmarkDurableCreates(b *testing.B) {
	for b.Loop() {
		fmt.Fprintf(os.Stdout, "\ndurable 1 KiB creates, %v per point\n", pointDuration)
		fmt.Fprintf(os.Stdout, "%-4s %14s %10s %10s %8s %16s %10s %10s %8s %7s\n",
			"c", "store ops/s", "p50", "p99", "CPU µs", "baseline ops/s", "p50", "p99", "CPU µs", "ratio")
		for _, c := range []int{1, 16, 64} {
			s := storeCreates(b, c)
			base := baselineCreates(b, c)
			ratio := s.perSec() / base.perSec()
			fmt.Fprintf(os.Stdout, "%-4d %14.0f %10v %10v %8.0f %16.0f %10v %10v %8.0f %6.2fx\n",
				c, s.perSec(), s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond), s.cpuPerOp(),
				base.perSec(), base.p50.Round(time.Microsecond), base.p99.Round(time.Microsecond), base.cpuPerOp(), ratio)
			b.ReportMetric(s.perSec(), fmt.Sprintf("creates/s-c%d", c))
			b.ReportMetric(ratio, fmt.Sprintf("x-baseline-c%d", c))
			b.ReportMetric(s.cpuPerOp(), fmt.Sprintf("cpu-µs/create-c%d", c))
		}
	}
}

// BenchmarkWatchFanout has 1,000 watchers on one prefix while 64 writers
// create documents, and prints the events delivered per second and the
// write-to-delivery latency.
func BenchmarkWatchFanout(b *testing.B) {
	const watchers, writers, events = 1000, 64, 4000
	for b.Loop() {
		db, err := badger.Open(b.TempDir(), badger.Options{
			CompactionInterval: -1, ValueLogGCInterval: -1,
			WatchBuffer: events, // measure fan-out, not the slow-watcher cut-off
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		prefix := store.ResourcePrefix("bench.setpoint.dev", "widgets", "default")
		var wg sync.WaitGroup
		lats := make([][]time.Duration, watchers)
		var cut atomic.Int64
		for i := range watchers {
			w, err := db.Watch(ctx, prefix, 0)
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				defer w.Stop()
				l := make([]time.Duration, 0, events)
				for ev := range w.Events() {
					// The value starts with {"t":<unix nanos>, written just
					// before the write was issued.
					v := ev.Object.Value
					ns, _ := strconv.ParseInt(string(v[5:bytesIndex(v, ',')]), 10, 64)
					l = append(l, time.Duration(time.Now().UnixNano()-ns))
					if len(l) == events {
						break
					}
				}
				if len(l) < events {
					cut.Add(1)
				}
				lats[i] = l
			})
		}
		start := time.Now()
		var next atomic.Int64
		var wwg sync.WaitGroup
		for g := range writers {
			wwg.Go(func() {
				for n := int(next.Add(1)); n <= events; n = int(next.Add(1)) {
					v := fmt.Appendf(nil, `{"t":%d,"pad":"%s"}`, time.Now().UnixNano(), value1K[9:1000])
					if _, err := db.Create(ctx, benchKey(g, n), v); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wwg.Wait()
		writeTime := time.Since(start)
		wg.Wait()
		elapsed := time.Since(start)
		all := slices.Concat(lats...)
		slices.Sort(all)
		fmt.Fprintf(os.Stdout, "\nwatch fan-out: %d watchers on one prefix, %d writers, %d events of 1 KiB\n", watchers, writers, events)
		fmt.Fprintf(os.Stdout, "writes %.0f/s; delivered %d events in %v: %.0f events/s; write-to-delivery p50 %v p99 %v; watchers cut off: %d\n",
			float64(events)/writeTime.Seconds(), len(all), elapsed.Round(time.Millisecond),
			float64(len(all))/elapsed.Seconds(), quantile(all, 0.5).Round(time.Microsecond),
			quantile(all, 0.99).Round(time.Microsecond), cut.Load())
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(quantile(all, 0.99).Microseconds()), "p99-µs")
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func bytesIndex(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return len(b)
}
