package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/checker"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// awayLeases is where TestEtcdAwayUnderWatches writes: a namespace of its
// own, apart from the server's own Leases.
const awayLeases = "/apis/coordination.k8s.io/v1/namespaces/away/leases/"

// resumingWatch follows path as a client does: it watches from the last
// resourceVersion it saw, opens the watch again when it ends, and relists
// after 410 Gone; each connection is a checker.Segment. Event values are
// the Leases' holderIdentity.
type resumingWatch struct {
	s    *testserver.Server
	c    *http.Client
	path string

	mu   sync.Mutex
	segs []checker.Segment
	last int64 // last revision seen
	errs []string
}

func (w *resumingWatch) run(ctx context.Context, from int64) {
	w.mu.Lock()
	w.last = from
	w.mu.Unlock()
	for ctx.Err() == nil {
		w.mu.Lock()
		start := w.last
		w.mu.Unlock()
		gone := w.segment(ctx, start)
		if gone {
			rv, err := w.relist(ctx)
			if err != nil {
				w.fail("relist after 410: %v", err)
				return
			}
			w.mu.Lock()
			w.last = rv
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // as a client backs off
		}
	}
}

func (w *resumingWatch) fail(format string, args ...any) {
	w.mu.Lock()
	w.errs = append(w.errs, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// segment runs one watch connection from start; it reports 410 Gone.
func (w *resumingWatch) segment(ctx context.Context, start int64) (gone bool) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet,
		fmt.Sprintf("%s%s?watch=1&allowWatchBookmarks=true&resourceVersion=%d", w.s.URL, w.path, start), nil)
	req.Header.Set("Authorization", "Bearer "+w.s.Token)
	resp, err := w.c.Do(req)
	if err != nil {
		return false // the server's store is away, or the test ends: try again
	}
	defer resp.Body.Close()
	seg := checker.Segment{StartRV: start}
	defer func() {
		w.mu.Lock()
		w.segs = append(w.segs, seg)
		w.mu.Unlock()
	}()
	if resp.StatusCode == http.StatusGone {
		seg.Gone = true
		return true
	}
	if resp.StatusCode != http.StatusOK {
		return false // 503 while the store is away: try again
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Type   string
			Object struct {
				Code     int
				Metadata struct{ Name, ResourceVersion string }
				Spec     struct {
					HolderIdentity string `json:"holderIdentity"`
				}
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			w.fail("watch event %q: %v", sc.Text(), err)
			return false
		}
		if ev.Type == "ERROR" {
			if ev.Object.Code == http.StatusGone {
				seg.Gone = true
				return true
			}
			return false
		}
		rv, err := strconv.ParseInt(ev.Object.Metadata.ResourceVersion, 10, 64)
		if err != nil {
			w.fail("watch event %q: resourceVersion: %v", sc.Text(), err)
			return false
		}
		seg.Events = append(seg.Events, checker.WatchEvent{Type: ev.Type, Name: ev.Object.Metadata.Name, RV: rv, Value: ev.Object.Spec.HolderIdentity})
		w.mu.Lock()
		w.last = max(w.last, rv)
		w.mu.Unlock()
	}
	return false
}

func (w *resumingWatch) relist(ctx context.Context) (int64, error) {
	for ctx.Err() == nil {
		code, body, err := w.s.Do(http.MethodGet, w.path, w.s.Token, nil)
		if err == nil && code == http.StatusOK {
			var l struct {
				Metadata struct{ ResourceVersion string }
			}
			if err := json.Unmarshal(body, &l); err != nil {
				return 0, err
			}
			return strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, ctx.Err()
}

func (w *resumingWatch) seen() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// leaseWriter writes Leases through the API and records, for the watch
// checker, every write whose outcome it knows and every value it tried.
type leaseWriter struct {
	t         *testing.T
	s         *testserver.Server
	c         *http.Client
	known     []checker.Write
	attempted map[string]bool
	n         int
}

// write creates (or, with update set, patches) the Lease name with a new
// holderIdentity, bounded by timeout; it returns the HTTP code and body.
func (lw *leaseWriter) write(name string, update bool, timeout time.Duration) (int, string, error) {
	lw.n++
	value := fmt.Sprintf("v-%04d", lw.n)
	lw.attempted[value] = true
	method, path, ctype := http.MethodPost, strings.TrimSuffix(awayLeases, "/"), "application/json"
	body := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q},"spec":{"holderIdentity":%q}}`, name, value)
	want := http.StatusCreated
	if update {
		method, path, ctype, want = http.MethodPatch, awayLeases+name, "application/merge-patch+json", http.StatusOK
		body = fmt.Sprintf(`{"spec":{"holderIdentity":%q}}`, value)
	}
	code, b, err := lw.s.DoWith(method, path, lw.s.Token, strings.NewReader(body), testserver.DoOptions{
		Header: http.Header{"Content-Type": {ctype}}, Client: lw.c, Timeout: timeout})
	if err != nil {
		return 0, "", err
	}
	if code == want {
		var l struct {
			Metadata struct{ ResourceVersion string }
		}
		if err := json.Unmarshal(b, &l); err != nil {
			lw.t.Fatalf("%s %s: %v", method, name, err)
		}
		rv, err := strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64)
		if err != nil {
			lw.t.Fatalf("%s %s: resourceVersion %q", method, name, l.Metadata.ResourceVersion)
		}
		lw.known = append(lw.known, checker.Write{Name: name, Value: value, RV: rv})
	}
	return code, string(b), nil
}

// TestEtcdAwayUnderWatches runs a server on etcd with an HTTP watch that
// resumes from its resourceVersion and a client-go informer open, then
// stops etcd (every member): reads and writes answer 503 with a message
// that says the store is unavailable within --request-timeout, the server
// keeps running, and watches stay open or end and are resumed. With etcd
// started again, writes succeed, and what the HTTP watch delivered across
// the outage is checked against every write (in order, no duplicate, no
// gap, no value nobody wrote: checker.CheckWatch); the informer's
// handlers saw each object's versions in order and its cache ends equal
// to the server's list.
func TestEtcdAwayUnderWatches(t *testing.T) {
	const requestTimeout = 3 * time.Second
	e := etcdtest.Start(t, etcdtest.Options{})
	s := testserver.Start(t, testserver.Options{LogLevel: "warn", Args: []string{
		"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/away",
		"--request-timeout", requestTimeout.String()}})
	if code, body, err := s.Do(http.MethodPost, "/api/v1/namespaces", s.Token,
		strings.NewReader(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"away"}}`)); err != nil || code != http.StatusCreated {
		t.Fatalf("create namespace: %d %v %s", code, err, body)
	}
	lw := &leaseWriter{t: t, s: s, c: s.HTTPClient(), attempted: map[string]bool{}}
	for i := range 5 {
		if code, body, err := lw.write(fmt.Sprintf("a-%d", i), false, requestTimeout+time.Second); err != nil || code != http.StatusCreated {
			t.Fatalf("create before: %d %v %s", code, err, body)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	var factory informers.SharedInformerFactory
	defer func() {
		// The informers and the watch stop with ctx.
		cancel()
		if factory != nil {
			factory.Shutdown()
		}
		bg.Wait()
	}()

	// The HTTP watch, from the revision of the first write.
	wc := s.HTTPClient()
	wc.Timeout = 0
	w := &resumingWatch{s: s, c: wc, path: strings.TrimSuffix(awayLeases, "/")}
	from := lw.known[0].RV
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	var wg sync.WaitGroup
	wg.Go(func() { w.run(wctx, from) })

	// The informer.
	cs, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("away"))
	inf := factory.Coordination().V1().Leases().Informer()
	var imu sync.Mutex
	var ievents []checker.WatchEvent
	record := func(typ string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return
		}
		rv, _ := strconv.ParseInt(l.ResourceVersion, 10, 64)
		imu.Lock()
		ievents = append(ievents, checker.WatchEvent{Type: typ, Name: l.Name, RV: rv})
		imu.Unlock()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { record(checker.Added, o) },
		UpdateFunc: func(_, o any) { record(checker.Modified, o) },
		DeleteFunc: func(o any) { record(checker.Deleted, o) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	for i := range 3 {
		if code, body, err := lw.write(fmt.Sprintf("a-%d", i), true, requestTimeout+time.Second); err != nil || code != http.StatusOK {
			t.Fatalf("update before: %d %v %s", code, err, body)
		}
	}
	beforeRV := lw.known[len(lw.known)-1].RV
	testsupport.Poll(t, 10*time.Second, "the HTTP watch delivers the writes made before etcd stops", func() (bool, string) {
		return w.seen() >= beforeRV, fmt.Sprintf("seen %d, want %d", w.seen(), beforeRV)
	})

	// etcd away.
	e.Stop()
	stopped := time.Now()
	timed := func(what string, f func() (int, string, error)) {
		t.Helper()
		t0 := time.Now()
		code, body, err := f()
		took := time.Since(t0)
		t.Logf("etcd away: %s answered %d in %v: %.200s", what, code, took.Round(time.Millisecond), body)
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "store is unavailable") {
			t.Errorf("etcd away: %s: %d %v %s; want 503 saying the store is unavailable", what, code, err, body)
		}
		if took > requestTimeout+time.Second {
			t.Errorf("etcd away: %s answered after %v, over --request-timeout %v", what, took, requestTimeout)
		}
	}
	timed("create", func() (int, string, error) { return lw.write("away-0", false, requestTimeout+10*time.Second) })
	timed("update", func() (int, string, error) { return lw.write("a-3", true, requestTimeout+10*time.Second) })
	timed("get", func() (int, string, error) {
		code, body, err := s.Do(http.MethodGet, awayLeases+"a-0", s.Token, nil)
		return code, string(body), err
	})
	if err := s.Wait(100 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("the server exited while etcd was away: %v", err)
	}
	t0 := time.Now()
	if code, _, err := s.Do(http.MethodGet, "/version", s.Token, nil); err != nil || code != http.StatusOK || time.Since(t0) > time.Second {
		t.Errorf("/version while etcd is away: %d %v after %v, want 200 at once: the server is not hung", code, err, time.Since(t0))
	}

	// etcd back.
	if err := e.Restart(30 * time.Second); err != nil {
		t.Fatalf("restart etcd: %v", err)
	}
	t.Logf("etcd away for %v", time.Since(stopped).Round(time.Millisecond))
	back := time.Now()
	testsupport.Poll(t, 20*time.Second, "writes succeed once etcd is back", func() (bool, string) {
		code, body, err := lw.write("b-0", false, requestTimeout+time.Second)
		return err == nil && (code == http.StatusCreated || code == http.StatusConflict), fmt.Sprintf("%d %v %.200s", code, err, body)
	})
	t.Logf("etcd back: writes succeed %v after it answers healthy", time.Since(back).Round(time.Millisecond))
	for i := range 3 {
		if code, body, err := lw.write(fmt.Sprintf("b-%d", i+1), false, requestTimeout+time.Second); err != nil || code != http.StatusCreated {
			t.Errorf("create after: %d %v %s", code, err, body)
		}
		if code, body, err := lw.write(fmt.Sprintf("a-%d", i), true, requestTimeout+time.Second); err != nil || code != http.StatusOK {
			t.Errorf("update after: %d %v %s", code, err, body)
		}
	}
	if code, body, err := s.Do(http.MethodDelete, awayLeases+"a-4", s.Token, nil); err != nil || code != http.StatusOK {
		t.Errorf("delete after: %d %v %s", code, err, body)
	}
	if code, body, err := lw.write("b-9", false, requestTimeout+time.Second); err != nil || code != http.StatusCreated {
		t.Fatalf("create after: %d %v %s", code, err, body)
	}
	lastRV := lw.known[len(lw.known)-1].RV

	// The HTTP watch caught up with no gap.
	testsupport.Poll(t, 20*time.Second, "the HTTP watch delivers every write made once etcd is back", func() (bool, string) {
		return w.seen() >= lastRV, fmt.Sprintf("seen %d, want %d", w.seen(), lastRV)
	})
	wcancel()
	wg.Wait()
	w.mu.Lock()
	segs, werrs := w.segs, w.errs
	w.mu.Unlock()
	for _, msg := range werrs {
		t.Error(msg)
	}
	events := 0
	for _, sg := range segs {
		events += len(sg.Events)
	}
	t.Logf("HTTP watch: %d connections, %d events, %d writes known", len(segs), events, len(lw.known))
	if err := checker.CheckWatch(segs, lw.known, lw.attempted); err != nil {
		t.Errorf("the HTTP watch across etcd's outage:\n%v", err)
	}

	// The informer: each object's versions in order, and its cache equals
	// the server's list.
	code, body, err := s.Do(http.MethodGet, awayLeases, s.Token, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("list: %d %v %s", code, err, body)
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name, ResourceVersion string }
		}
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, it := range list.Items {
		want[it.Metadata.Name] = it.Metadata.ResourceVersion
	}
	testsupport.Poll(t, 20*time.Second, "the informer's cache equals the server's list", func() (bool, string) {
		got := map[string]string{}
		for _, o := range inf.GetStore().List() {
			l := o.(*coordinationv1.Lease)
			got[l.Name] = l.ResourceVersion
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return false, fmt.Sprintf("informer %v, server %v", got, want)
		}
		return true, ""
	})
	imu.Lock()
	defer imu.Unlock()
	if err := checker.CheckPerObjectOrder(ievents); err != nil {
		t.Errorf("the informer's handlers across etcd's outage:\n%v", err)
	}
	if _, err := cs.CoordinationV1().Leases("away").Get(context.Background(), "b-9", metav1.GetOptions{}); err != nil {
		t.Errorf("client-go get after recovery: %v", err)
	}
}
