package replicas

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
)

// stampKey is the annotation whose value is the write's start, in Unix
// nanoseconds ("probe" for the probe write that checks every watcher is
// live).
const stampKey = "bench.setpoint.dev/t"

var (
	stampJSON = []byte(`"` + stampKey + `":"`)
	probe     = []byte("probe")
)

// fanout counts what a set of watchers receives: deliveries, probes, and
// each watcher's latencies from a write's start to its receipt.
type fanout struct {
	delivered atomic.Int64
	probes    atomic.Int64
	last      atomic.Int64 // the last delivery, Unix ns
	lats      [][]time.Duration
	wg        sync.WaitGroup
	closed    atomic.Int64 // watches that ended before the benchmark ended them
	firstErr  atomic.Value // the first of those watches' error
}

func newFanout(n int) *fanout {
	return &fanout{lats: make([][]time.Duration, n)}
}

// lost records a watch that ended early: the server closed it (as it
// closes watchers too slow to keep up) or the connection broke.
func (f *fanout) lost(err error) {
	f.firstErr.CompareAndSwap(nil, err)
	f.closed.Add(1)
}

// receive accounts for one event carrying stamp (the annotation's or the
// etcd value's leading bytes) at watcher w.
func (f *fanout) receive(w int, stamp []byte, now time.Time) {
	if bytes.HasPrefix(stamp, probe) {
		f.probes.Add(1)
		return
	}
	var ns int64
	for _, c := range stamp {
		if c < '0' || c > '9' {
			break
		}
		ns = ns*10 + int64(c-'0')
	}
	if ns == 0 {
		return
	}
	f.lats[w] = append(f.lats[w], now.Sub(time.Unix(0, ns)))
	f.delivered.Add(1)
	f.last.Store(now.UnixNano())
}

// latencies are every watcher's latencies, sorted; only once the watchers
// have stopped.
func (f *fanout) latencies() []time.Duration {
	var all []time.Duration
	for _, l := range f.lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	return all
}

// fanResult is one watch fan-out measurement.
type fanResult struct {
	watchers, updates int
	delivered         int64
	elapsed           time.Duration // first write's start to last delivery
	writes            benchtest.Phase
	p50, p99          time.Duration
	cpu               float64 // seconds, the servers' and etcd's
	etcdCPU           float64 // seconds, etcd's part of cpu
	closed            int64   // watches that ended early
}

func (r fanResult) rate() float64 { return float64(r.delivered) / r.elapsed.Seconds() }

// watchHTTP opens n HTTP watches (one connection each, spread over the
// replicas round robin) of the Widgets of ns from rv. Each reads the
// newline-delimited JSON events and looks only for the stamp annotation:
// the watchers share the machine's cores with the servers, so they spend
// as little as they can.
func watchHTTP(ctx context.Context, d *deployment, n int, ns, rv string) (*fanout, error) {
	f := newFanout(n)
	path := widgets(ns) + "?watch=true&allowWatchBookmarks=false&resourceVersion=" + rv
	for w := range n {
		c := d.pick(w)
		req, err := http.NewRequestWithContext(ctx, "GET", c.url+path, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Accept", "application/json")
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, fmt.Errorf("watcher %d: %w", w, err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return nil, fmt.Errorf("watcher %d: %d %.200s", w, resp.StatusCode, b)
		}
		f.wg.Go(func() {
			defer resp.Body.Close()
			r := bufio.NewReaderSize(resp.Body, 64<<10)
			for {
				line, err := benchtest.ReadLine(r)
				if err != nil {
					if ctx.Err() == nil {
						f.lost(fmt.Errorf("watcher %d: %w", w, err))
					}
					return
				}
				if i := bytes.Index(line, stampJSON); i >= 0 {
					f.receive(w, line[i+len(stampJSON):], time.Now())
				}
			}
		})
	}
	return f, nil
}

// watchEtcd opens n etcd watches of prefix from rev, over one client
// connection for every 25 watchers.
func watchEtcd(ctx context.Context, endpoint string, n int, prefix string, rev int64) (*fanout, error) {
	f := newFanout(n)
	var clients []*clientv3.Client
	for w := range n {
		if w%25 == 0 {
			c, err := newEtcdClient(endpoint)
			if err != nil {
				return nil, err
			}
			clients = append(clients, c)
		}
		ch := clients[len(clients)-1].Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
		f.wg.Go(func() {
			for resp := range ch {
				if err := resp.Err(); err != nil {
					if ctx.Err() == nil {
						f.lost(fmt.Errorf("etcd watcher %d: %w", w, err))
					}
					return
				}
				now := time.Now()
				for _, ev := range resp.Events {
					f.receive(w, ev.Kv.Value, now)
				}
			}
		})
	}
	go func() {
		<-ctx.Done()
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	return f, nil
}

// measureFanout waits until every watcher has seen a probe write (so all
// are live), then has writers workers make updates writes with write(i,
// stamp) and waits until each watcher has received every one, or until
// no delivery came for quiet after the last write. cpu reads the CPU of
// the processes that serve.
func measureFanout(b *testing.B, f *fanout, watchers, updates, workers int, cpu func() (all, etcd float64),
	write func(ctx context.Context, i int, stamp string) error, timeout time.Duration) fanResult {
	const quiet = 5 * time.Second
	if err := write(context.Background(), 0, "probe"); err != nil {
		b.Fatalf("probe write: %v", err)
	}
	waitFor(b, time.Minute, "every watcher sees the probe", func() (bool, string) {
		n, closed := f.probes.Load(), f.closed.Load()
		return n+closed >= int64(watchers), fmt.Sprintf("%d of %d watchers (%d closed)", n, watchers, closed)
	})
	cpu0, etcd0 := cpu()
	start := time.Now()
	p := benchtest.Run(workers, updates, timeout, func(ctx context.Context, i int) error {
		return write(ctx, i, fmt.Sprint(time.Now().UnixNano()))
	})
	if p.Err != nil {
		b.Fatalf("updates: %v", p.Err)
	}
	want := int64(updates) * int64(watchers)
	deadline := time.Now().Add(timeout)
	for f.delivered.Load() < want && time.Now().Before(deadline) {
		if last := time.Unix(0, f.last.Load()); time.Since(last) > quiet && time.Since(start) > p.Elapsed+quiet {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cpu1, etcd1 := cpu()
	r := fanResult{watchers: watchers, updates: updates, delivered: f.delivered.Load(), writes: p, cpu: cpu1 - cpu0, etcdCPU: etcd1 - etcd0, closed: f.closed.Load()}
	r.elapsed = time.Unix(0, f.last.Load()).Sub(start)
	if r.delivered < want {
		err, _ := f.firstErr.Load().(error)
		b.Logf("%d of %d deliveries; %d watches ended early (first: %v)", r.delivered, want, r.closed, err)
	}
	return r
}

// finish stops the watchers (cancel) and computes the latencies.
func (r *fanResult) finish(f *fanout, cancel context.CancelFunc) {
	cancel()
	f.wg.Wait()
	lat := f.latencies()
	r.p50, r.p99 = benchtest.Quantile(lat, 0.5), benchtest.Quantile(lat, 0.99)
}

// watchWidget is a small Widget for the fan-out, with the stamp
// annotation.
func watchWidget(name string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":%q,"annotations":{%q:"0"}},"spec":{"name":%q,"size":"small"}}`,
		name, stampKey, name)
}

// fanoutAPI measures watch fan-out on d: objects Widgets in a namespace
// of their own, watchers HTTP watchers spread over the replicas, updates
// merge patches of the stamp annotation through the replicas round robin.
func fanoutAPI(b *testing.B, d *deployment, watchers, updates, workers, objects int, drain time.Duration) fanResult {
	ns := "watch"
	createNamespace(b, d, ns)
	p := benchtest.Run(workers, objects, drain, func(ctx context.Context, i int) error {
		_, err := d.pick(i).expect(ctx, http.StatusCreated, "POST", widgets(ns), "application/json", watchWidget(fmt.Sprintf("f%04d", i)))
		return err
	})
	if p.Err != nil {
		b.Fatalf("%s: create the watched widgets: %v", d.name, p.Err)
	}
	body, err := d.clients[0].expect(context.Background(), http.StatusOK, "GET", widgets(ns)+"?limit=1", "", nil)
	if err != nil {
		b.Fatal(err)
	}
	rv := listRV(b, body)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := watchHTTP(ctx, d, watchers, ns, rv)
	if err != nil {
		b.Fatalf("%s: %v", d.name, err)
	}
	r := measureFanout(b, f, watchers, updates, workers, func() (float64, float64) { return d.cpu(b), d.etcdCPU(b) },
		func(ctx context.Context, i int, stamp string) error {
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, stampKey, stamp)
			_, err := d.pick(i).expect(ctx, http.StatusOK, "PATCH", fmt.Sprintf("%s/f%04d", widgets(ns), i%objects), "application/merge-patch+json", patch)
			return err
		}, drain)
	r.finish(f, cancel)
	return r
}

// fanoutEtcd measures the same fan-out on raw etcd: watchers etcd watches
// of a prefix, updates Puts of values as large as the Widgets.
func fanoutEtcd(b *testing.B, e *etcdBase, watchers, updates, workers, objects int, drain time.Duration) fanResult {
	prefix := "/rawwatch/"
	size := len(watchWidget("f0000"))
	value := func(stamp string) string { return stamp + strings.Repeat("x", max(size-len(stamp), 0)) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r0, err := e.client.Get(context.Background(), "/")
	if err != nil {
		b.Fatal(err)
	}
	f, err := watchEtcd(ctx, e.endpoint, watchers, prefix, r0.Header.Revision+1)
	if err != nil {
		b.Fatal(err)
	}
	r := measureFanout(b, f, watchers, updates, workers, func() (float64, float64) { c := e.cpu(b); return c, c },
		func(ctx context.Context, i int, stamp string) error {
			_, err := e.client.Put(ctx, fmt.Sprintf("%sf%04d", prefix, i%objects), value(stamp))
			return err
		}, drain)
	r.finish(f, cancel)
	return r
}

func listRV(b *testing.B, body []byte) string {
	i := bytes.Index(body, []byte(`"resourceVersion":"`))
	if i < 0 {
		b.Fatalf("list without a resourceVersion: %.200s", body)
	}
	rest := body[i+len(`"resourceVersion":"`):]
	j := bytes.IndexByte(rest, '"')
	return string(rest[:j])
}
