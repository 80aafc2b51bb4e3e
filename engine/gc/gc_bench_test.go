package gc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// fillWidgets stores n unrelated widgets straight into st (no API write
// path), in namespace default, each owned by owner when it is not empty.
func fillWidgets(tb testing.TB, st store.Store, prefix string, n int, owner *metav1.OwnerReference) {
	tb.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				name := fmt.Sprintf("%s-%d", prefix, i)
				refs := ""
				if owner != nil {
					refs = fmt.Sprintf(`,"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q}]`, owner.APIVersion, owner.Kind, owner.Name, owner.UID)
				}
				doc := fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"creationTimestamp":"2026-11-21T08:00:00Z","generation":1,"name":%q,"namespace":"default"%s,"uid":"%s-uid-%d"},"spec":{"name":"W %s","size":"small"},"status":{"state":"Ready","lastProvisioned":"2026-11-21T08:00:00Z"}}`,
					name, refs, prefix, i, name)
				if _, err := st.Create(ctx, store.ObjectKey(widgets.Group, widgets.Resource, "default", name), []byte(doc)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkGCDelete measures the collector's CPU and wall time to collect
// the 10 dependents of one deleted owner with N unrelated objects in the
// store: the sweep (the old collector, run as after a delete: sweeps until
// one changes nothing) and the graph (the incremental collector, running),
// alternated, with the load average beside each figure.
func BenchmarkGCDelete(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) { benchGCDelete(b, n) })
	}
}

func benchGCDelete(b *testing.B, n int) {
	ctx := context.Background()
	db, err := badger.Open(b.TempDir(), badger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := engine.New(ctx, engine.Options{Store: db, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(b), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	c, err := New(s, Options{Store: db, SweepInterval: time.Hour, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	fillWidgets(b, db, "unrelated", n, nil)
	const deps = 10
	// owned creates an owner and its dependents and returns the owner's name.
	owned := func(tag string) string {
		o := widget("owner-"+tag, "small", nil)
		out, err := s.Create(ctx, widgets, o, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ref := metav1.OwnerReference{APIVersion: out.GetAPIVersion(), Kind: out.GetKind(), Name: out.GetName(), UID: out.GetUID()}
		fillWidgets(b, db, "dep-"+tag, deps, &ref)
		return out.GetName()
	}
	depsLeft := func(tag string) int {
		res, err := db.List(ctx, store.ResourcePrefix(widgets.Group, widgets.Resource, "default")+"dep-"+tag+"-", store.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return len(res.Items)
	}
	var cpu, wall [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The sweep, with no collector running.
		tag := fmt.Sprintf("s%d", i)
		name := owned(tag)
		la := loadavg()
		c0, t0 := processCPU(), time.Now()
		if err := s.Delete(ctx, widgets, "default", name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		c.sweepRounds(ctx)
		dc, dw := processCPU()-c0, time.Since(t0)
		if left := depsLeft(tag); left != 0 {
			b.Fatalf("sweep left %d dependents", left)
		}
		cpu[0] += dc
		wall[0] += dw
		b.Logf("N=%d sweep: cpu %v wall %v (loadavg %s)", n, dc.Round(time.Microsecond), dw.Round(time.Microsecond), la)

		// The graph: a server whose collector runs and has caught up.
		tag = fmt.Sprintf("g%d", i)
		g, err := engine.New(ctx, engine.Options{Store: db, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		gc, err := New(g, Options{Store: db, SweepInterval: time.Hour, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		var running sync.WaitGroup
		running.Go(func() { _ = g.Run(runCtx) })
		running.Go(func() { _ = gc.Run(runCtx) })
		name = owned(tag)
		cur, _ := db.CurrentRevision(ctx)
		for gc.rev.Load() < cur {
			time.Sleep(time.Millisecond)
		}
		la = loadavg()
		c0, t0 = processCPU(), time.Now()
		if err := g.Delete(ctx, widgets, "default", name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		for depsLeft(tag) != 0 {
			time.Sleep(200 * time.Microsecond)
		}
		dc, dw = processCPU()-c0, time.Since(t0)
		cancel()
		running.Wait()
		cpu[1] += dc
		wall[1] += dw
		b.Logf("N=%d graph: cpu %v wall %v (loadavg %s)", n, dc.Round(time.Microsecond), dw.Round(time.Microsecond), la)
	}
	b.StopTimer()
	for m, mode := range []string{"sweep", "graph"} {
		b.ReportMetric(float64(cpu[m].Microseconds())/float64(b.N), mode+"-cpu-µs/delete")
		b.ReportMetric(float64(wall[m].Microseconds())/float64(b.N), mode+"-wall-µs/delete")
	}
}

// BenchmarkGCGraphMemory reports the heap the ownership graph holds per
// object, for objects without and with one owner reference.
func BenchmarkGCGraphMemory(b *testing.B) {
	const n = 50000
	for _, withOwner := range []bool{false, true} {
		b.Run(fmt.Sprintf("owned=%v", withOwner), func(b *testing.B) {
			ctx := context.Background()
			db, err := badger.Open(b.TempDir(), badger.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			s, err := engine.New(ctx, engine.Options{Store: db, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			c, err := New(s, Options{Store: db, SweepInterval: time.Hour, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(b), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			var ref *metav1.OwnerReference
			if withOwner {
				fillWidgets(b, db, "owner", 1, nil) // present, so that the relist queues nothing
				ref = &metav1.OwnerReference{APIVersion: "example.setpoint.dev/v1", Kind: "Widget", Name: "owner-0", UID: "owner-uid-0"}
			}
			fillWidgets(b, db, "w", n, ref)
			var perObject float64
			for i := 0; i < b.N; i++ {
				c.mu.Lock()
				c.g = newGCGraph()
				c.mu.Unlock()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				if _, err := c.relist(ctx); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perObject = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
				if q := c.q.Len(); q != 0 {
					b.Fatalf("the relist queued %d objects", q)
				}
			}
			b.ReportMetric(perObject, "B/object")
		})
	}
}
