package test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/checker"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// linCRD is the kind the linearizability histories write: one string,
// data, unique per write so that every read shows which write it saw.
var linCRD = testsupport.CRD{Group: "test.setpoint.dev", Kind: "Lin", Schema: `{"properties":{"data":{"type":"string"}},"type":"object"}`}.String()

var linGVR = schema.GroupVersionResource{Group: "test.setpoint.dev", Version: "v1", Resource: "lins"}

const (
	linKeys    = 3
	linClients = 6
)

// TestLinearizability checks SETPOINT_LIN_HISTORIES (2 unless set; make
// soak-linearizability runs 100) short histories against one server: for
// each, concurrent clients create, get, update with a resourceVersion
// precondition, delete and list a few objects over HTTPS while the server
// is killed with SIGKILL and restarted on the same data directory; a raw
// HTTP watch, a WebSocket watch and a client-go informer follow the
// namespace through the restart, with bookmarks every 250ms. The history
// must be linearizable (porcupine, test/checker's model), the watches must
// hold test/checker's guarantees, and every list a watcher made (at its
// start and after 410 Gone) must hold what the history shows at the
// list's resourceVersion.
//
// A history too thin to prove anything (a loaded machine's clients got few
// operations through, or a watch saw no bookmark) or whose check timed out
// (unknown) is not counted: another one runs, twice as long as the last
// thin one up to 4 times, at most histories/5 (at least 2) times in all.
//
// It runs on the embedded store and on the etcd backend (a real etcd, which
// stays up while the server is killed).
func TestLinearizability(t *testing.T) {
	histories := 2
	if v := os.Getenv("SETPOINT_LIN_HISTORIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SETPOINT_LIN_HISTORIES=%q: want a positive count", v)
		}
		histories = n
	}
	// Compaction keeps little history and runs often, so that watches
	// resumed after the crash also meet 410 Gone and relist.
	compact := []string{"--history-min-revisions", "20", "--history-min-age", "1ms", "--history-compaction-interval", "100ms",
		"--watch-bookmark-interval", "250ms"}
	t.Run("badger", func(t *testing.T) {
		testLinearizability(t, testserver.Start(t, testserver.Options{Args: compact}), histories)
	})
	t.Run("etcd", func(t *testing.T) {
		e := etcdtest.Start(t, etcdtest.Options{})
		args := append([]string{"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/lin"}, compact...)
		testLinearizability(t, testserver.Start(t, testserver.Options{Args: args}), histories)
	})
}

func testLinearizability(t *testing.T, s *testserver.Server, histories int) {
	if code, body, err := s.Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", s.Token, bytes.NewReader([]byte(linCRD))); err != nil || code != http.StatusCreated {
		t.Fatalf("create CRD: %d %s %v", code, body, err)
	}
	testsupport.Poll(t, 30*time.Second, "kind lins served", func() (bool, string) {
		code, _, err := s.Do("GET", "/apis/test.setpoint.dev/v1/lins", s.Token, nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v", code, err)
	})
	var ops, ambiguous, bookmarks, relists, proven, thin, unknown int
	var checkTime, slowest time.Duration
	scale := 1 // how much longer than the base a history runs
	retries := max(2, histories/5)
	h := 0
	for ; proven < histories && h < histories+retries; h++ {
		r := runLinHistory(t, s, h, scale)
		if t.Failed() {
			break
		}
		checkTime += r.checkTime
		slowest = max(slowest, r.checkTime)
		switch {
		case r.thin != "":
			thin++
			scale = min(4, 2*scale)
			t.Logf("history %d not counted, too thin to prove anything: %s; the next runs %dx as long", h, r.thin, scale)
		case r.unknown != nil:
			unknown++
			t.Logf("history %d not counted: %v", h, r.unknown)
		default:
			proven++
			ops += r.ops
			ambiguous += r.ambiguous
			bookmarks += r.bookmarks
			relists += r.relists
		}
	}
	t.Logf("%d histories proven of %d run (%d too thin, %d unknown): %d operations (%d cut off by a crash), linearizable; watches in order without gaps, %d bookmarks never behind nor ahead; %d lists as the history shows them; linearizability checks took %v, the slowest %v",
		proven, h, thin, unknown, ops, ambiguous, bookmarks, relists, checkTime.Round(time.Millisecond), slowest.Round(time.Millisecond))
	if !t.Failed() && proven < histories {
		t.Errorf("only %d of %d histories proven in %d runs (%d too thin, %d unknown)", proven, histories, h, thin, unknown)
	}
}

// linResult is what one history came to.
type linResult struct {
	ops, ambiguous, bookmarks, relists int
	// thin, when set, says why the history proves too little to count.
	thin string
	// unknown, when set, is the linearizability check's timeout.
	unknown error
	// checkTime is how long the linearizability check took.
	checkTime time.Duration
}

// linCheckTimeout bounds each history's linearizability check: the
// histories here take porcupine well under a second; one that takes a
// minute is unknown, not passed.
const linCheckTimeout = time.Minute

// linRecorder holds one history as the clients record it.
type linRecorder struct {
	start     time.Time
	mu        sync.Mutex
	ops       []checker.Operation
	attempted map[string]bool
}

func (r *linRecorder) now() int64 { return time.Since(r.start).Nanoseconds() }

func (r *linRecorder) snapshot() []checker.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

func (r *linRecorder) add(op checker.Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

type linObject struct {
	Metadata struct {
		Name            string `json:"name"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Data string `json:"data"`
}

type linList struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Items []linObject `json:"items"`
}

func linKey(name string) int {
	if len(name) == 2 && name[0] == 'k' && name[1] >= '0' && name[1] < '0'+linKeys {
		return int(name[1] - '0')
	}
	return -1
}

// linHTTP sends requests to the server with the admin token.
// It copies the URL and token: the server's fields are rewritten when it
// restarts, and both stay the same on the same data directory and port.
type linHTTP struct {
	url, token string
	client     *http.Client
}

func newLinHTTP(s *testserver.Server) *linHTTP {
	return &linHTTP{url: s.URL, token: s.Token, client: &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: s.CAPool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 32,
	}}}
}

// errRefused marks a request that never reached the server: it cannot
// have taken effect.
var errRefused = errors.New("connection refused")

func (c *linHTTP) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return 0, nil, errRefused
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// runLinHistory records and checks one history in its own namespace, its
// clients running scale times the base duration.
func runLinHistory(t *testing.T, s *testserver.Server, h, scale int) linResult {
	ns := fmt.Sprintf("lin-%d", h)
	if code, body, err := s.Do("POST", "/api/v1/namespaces", s.Token, bytes.NewReader([]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+ns+`"}}`))); err != nil || (code != http.StatusCreated && code != http.StatusConflict) {
		t.Fatalf("create namespace %s: %d %s %v", ns, code, body, err)
	}
	coll := "/apis/test.setpoint.dev/v1/namespaces/" + ns + "/lins"
	rec := &linRecorder{start: time.Now(), attempted: map[string]bool{}}
	hc := newLinHTTP(s)
	defer hc.client.CloseIdleConnections()

	wctx, stopWatches := context.WithCancel(context.Background())
	defer stopWatches()
	// Each watcher's lists join the history as a client of its own.
	rw := &rawWatcher{c: newLinHTTP(s), coll: coll, rec: rec, client: linClients + 1}
	defer rw.c.client.CloseIdleConnections()
	ep := endpointOf(s)
	ww := &rawWatcher{c: newLinHTTP(s), coll: coll, ws: &ep, rec: rec, client: linClients + 2}
	defer ww.c.client.CloseIdleConnections()
	inf := startLinInformer(t, s, ns, wctx.Done())
	var wwg sync.WaitGroup
	wwg.Add(2)
	go func() { defer wwg.Done(); rw.run(wctx) }()
	go func() { defer wwg.Done(); ww.run(wctx) }()

	stop := make(chan struct{})
	var cwg sync.WaitGroup
	for c := range linClients {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			runLinClient(t, hc, rec, coll, h, c, stop)
		}()
	}
	time.Sleep(time.Duration(scale*(300+rand.IntN(700))) * time.Millisecond)
	s.Crash()
	time.Sleep(time.Duration(scale*(300+rand.IntN(700))) * time.Millisecond)
	close(stop)
	cwg.Wait()

	// A final list joins the history: what survived must be what the
	// history allows.
	var final linList
	var finalList checker.List
	for try := 0; ; try++ {
		call := rec.now()
		code, body, err := hc.do(context.Background(), "GET", coll, nil)
		if err == nil && code == http.StatusOK && json.Unmarshal(body, &final) == nil {
			var out checker.Output
			out, finalList = linListOutput(final)
			rec.add(checker.Operation{Client: linClients, Input: checker.Input{Op: checker.OpList}, Output: out, Call: call, Return: rec.now()})
			break
		}
		if try > 100 {
			t.Fatalf("final list: %d %s %v", code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	var known []checker.Write
	var maxRV int64
	for _, op := range rec.snapshot() {
		if (op.Input.Op == checker.OpCreate || op.Input.Op == checker.OpUpdate) && op.Output.Result == checker.OK {
			rv, err := strconv.ParseInt(op.Output.RV, 10, 64)
			if err != nil {
				t.Fatalf("resourceVersion %q is not a number: %v", op.Output.RV, err)
			}
			known = append(known, checker.Write{Name: fmt.Sprintf("k%d", op.Input.Key), Value: op.Input.Value, RV: rv})
			maxRV = max(maxRV, rv)
		}
	}
	for _, it := range finalList.Items {
		maxRV = max(maxRV, it.RV)
	}
	want := map[string]string{}
	for _, it := range final.Items {
		want[it.Metadata.Name] = it.Metadata.ResourceVersion
	}
	// The watches must catch up with the last write and the informer
	// must hold the final state; then they stop.
	deadline := time.Now().Add(20 * time.Second)
	for !(rw.seen() >= maxRV && ww.seen() >= maxRV && inf.holds(want)) {
		if time.Now().After(deadline) {
			t.Errorf("history %d: watches did not catch up with revision %d: HTTP watch at %d, WebSocket watch at %d, informer holds %v, want %v", h, maxRV, rw.seen(), ww.seen(), inf.store(), want)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopWatches()
	wwg.Wait()

	ops := rec.snapshot()
	r := linResult{ops: len(ops)}
	for _, op := range ops {
		if op.Output.Result == checker.Ambiguous {
			r.ambiguous++
		}
	}
	segs, wsSegs := rw.segments(), ww.segments()
	evs, bms := countEvents(segs)
	wsEvs, wsBms := countEvents(wsSegs)
	r.bookmarks = bms + wsBms
	gone := 0
	for _, sg := range append(slices.Clone(segs), wsSegs...) {
		if sg.Gone {
			gone++
		}
	}
	// A history that wrote nothing, or watches that saw nothing, would
	// pass every check; this one counts only if it exercised them.
	if len(known) == 0 || evs == 0 || len(segs) < 2 || wsEvs == 0 || len(wsSegs) < 2 || len(inf.events()) == 0 || bms == 0 || wsBms == 0 {
		r.thin = fmt.Sprintf("%d operations, %d acknowledged writes, HTTP watch %d events and %d bookmarks over %d connections, WebSocket watch %d and %d over %d, %d informer events",
			len(ops), len(known), evs, bms, len(segs), wsEvs, wsBms, len(wsSegs), len(inf.events()))
	}
	lists := append(rw.listed(), ww.listed()...)
	lists = append(lists, finalList)
	r.relists = len(lists)
	if testing.Verbose() {
		t.Logf("history %d: %d operations, %d acknowledged writes, %d cut off; HTTP watch %d events, %d bookmarks over %d connections, WebSocket watch %d, %d over %d; %d relists after 410, %d lists checked; informer %d events",
			h, len(ops), len(known), r.ambiguous, evs, bms, len(segs), wsEvs, wsBms, len(wsSegs), gone, len(lists), len(inf.events()))
	}
	start := time.Now()
	err := checker.CheckLinearizable(ops, linCheckTimeout)
	r.checkTime = time.Since(start)
	if errors.Is(err, checker.ErrUnknown) {
		r.unknown = err
	} else if err != nil {
		t.Errorf("history %d (%d operations, %d cut off): %v", h, len(ops), r.ambiguous, err)
	}
	if err := checker.CheckWatch(segs, known, rec.attempted); err != nil {
		t.Errorf("history %d: raw HTTP watch over %d connections: %v", h, len(segs), err)
	}
	if err := checker.CheckWatch(wsSegs, known, rec.attempted); err != nil {
		t.Errorf("history %d: WebSocket watch over %d connections: %v", h, len(wsSegs), err)
	}
	allSegs := append(slices.Clone(segs), wsSegs...)
	for _, l := range lists {
		if err := checker.CheckList(l, known, allSegs, rec.attempted); err != nil {
			t.Errorf("history %d: list at %d: %v", h, l.RV, err)
		}
	}
	if err := checker.CheckPerObjectOrder(inf.events()); err != nil {
		t.Errorf("history %d: informer: %v", h, err)
	}
	if r.thin == "" {
		checkersCatchInjectedFaults(t, h, rec, segs, known, lists, allSegs)
	}
	return r
}

// countEvents counts the events and the bookmarks of segs.
func countEvents(segs []checker.Segment) (events, bookmarks int) {
	for _, sg := range segs {
		for _, ev := range sg.Events {
			if ev.Type == checker.Bookmark {
				bookmarks++
			} else {
				events++
			}
		}
	}
	return events, bookmarks
}

// linListOutput turns a list into the model's output and the list
// checker's input.
func linListOutput(l linList) (checker.Output, checker.List) {
	out := checker.Output{Items: map[int]checker.Obj{}}
	cl := checker.List{Items: map[string]checker.Listed{}}
	cl.RV, _ = strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64)
	for _, it := range l.Items {
		out.Items[linKey(it.Metadata.Name)] = checker.Obj{RV: it.Metadata.ResourceVersion, Value: it.Data}
		rv, _ := strconv.ParseInt(it.Metadata.ResourceVersion, 10, 64)
		cl.Items[it.Metadata.Name] = checker.Listed{RV: rv, Value: it.Data}
	}
	return out, cl
}

// runLinClient issues random operations until stop is closed, recording
// each with its call and return times.
func runLinClient(t *testing.T, c *linHTTP, rec *linRecorder, coll string, h, id int, stop <-chan struct{}) {
	rvs := map[int]string{} // the last resourceVersion this client saw per key
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		key := rand.IntN(linKeys)
		name := fmt.Sprintf("k%d", key)
		value := fmt.Sprintf("h%d-c%d-%d", h, id, seq)
		in := checker.Input{Key: key}
		var method, path string
		var body []byte
		switch p := rand.IntN(100); {
		case p < 25:
			in.Op, method, path = checker.OpGet, "GET", coll+"/"+name
		case p < 35:
			in.Op, method, path = checker.OpList, "GET", coll
		case p < 55:
			in.Op, in.Value, method, path = checker.OpCreate, value, "POST", coll
			body = fmt.Appendf(nil, `{"apiVersion":"test.setpoint.dev/v1","kind":"Lin","metadata":{"name":%q},"data":%q}`, name, value)
		case p < 90:
			in.RV = rvs[key]
			if in.RV == "" {
				in.RV = "1"
			}
			in.Op, in.Value, method, path = checker.OpUpdate, value, "PUT", coll+"/"+name
			body = fmt.Appendf(nil, `{"apiVersion":"test.setpoint.dev/v1","kind":"Lin","metadata":{"name":%q,"resourceVersion":%q},"data":%q}`, name, in.RV, value)
		default:
			in.Op, method, path = checker.OpDelete, "DELETE", coll+"/"+name
		}
		write := in.Op == checker.OpCreate || in.Op == checker.OpUpdate || in.Op == checker.OpDelete
		if in.Value != "" {
			rec.mu.Lock()
			rec.attempted[in.Value] = true
			rec.mu.Unlock()
		}
		call := rec.now()
		code, resp, err := c.do(context.Background(), method, path, body)
		ret := rec.now()
		out, ok := linOutput(in, code, resp, err)
		switch {
		case errors.Is(err, errRefused):
			// Never reached the server.
		case !ok && write:
			rec.add(checker.Operation{Client: id, Input: in, Output: checker.Output{Result: checker.Ambiguous}, Call: call, Return: checker.Infinity})
		case !ok:
			// A read without an answer tells nothing.
		default:
			rec.add(checker.Operation{Client: id, Input: in, Output: out, Call: call, Return: ret})
			if out.RV != "" {
				rvs[key] = out.RV
			}
			if out.Obj.RV != "" {
				rvs[key] = out.Obj.RV
			}
			for k, o := range out.Items {
				rvs[k] = o.RV
			}
			continue
		}
		if err == nil && code < 500 && code != http.StatusTooManyRequests {
			t.Errorf("%s %s: unexpected %d %s", method, path, code, resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// linOutput turns an answer into the model's output; ok is false when
// the answer does not say whether the operation took effect.
func linOutput(in checker.Input, code int, body []byte, err error) (checker.Output, bool) {
	if err != nil {
		return checker.Output{}, false
	}
	switch code {
	case http.StatusNotFound:
		if in.Op == checker.OpGet || in.Op == checker.OpUpdate || in.Op == checker.OpDelete {
			return checker.Output{Result: checker.NotFound}, true
		}
	case http.StatusConflict:
		if in.Op == checker.OpCreate || in.Op == checker.OpUpdate {
			return checker.Output{Result: checker.Conflict}, true
		}
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		if in.Op == checker.OpList {
			var l linList
			if json.Unmarshal(body, &l) != nil {
				return checker.Output{}, false
			}
			out, _ := linListOutput(l)
			return out, true
		}
		var o linObject
		if json.Unmarshal(body, &o) != nil {
			return checker.Output{}, false
		}
		switch in.Op {
		case checker.OpGet:
			return checker.Output{Obj: checker.Obj{RV: o.Metadata.ResourceVersion, Value: o.Data}}, true
		case checker.OpCreate, checker.OpUpdate:
			return checker.Output{RV: o.Metadata.ResourceVersion}, true
		case checker.OpDelete:
			return checker.Output{}, true
		}
	}
	return checker.Output{}, false
}

// rawWatcher follows a collection with chunked HTTP (or WebSocket)
// watches, resuming from the last revision it saw, relisting after 410 Gone
// and now and then by choice, and records each connection as a
// checker.Segment and each list as a checker.List.
type rawWatcher struct {
	c    *linHTTP
	coll string
	// ws, when set, makes each connection a WebSocket watch.
	ws *wsEndpoint
	// rec gets each list the watcher makes as an operation of client.
	rec    *linRecorder
	client int

	mu    sync.Mutex // guards segs, lists, last
	segs  []checker.Segment
	lists []checker.List
	last  int64
}

func (w *rawWatcher) listed() []checker.List {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.lists)
}

func (w *rawWatcher) seen() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

func (w *rawWatcher) segments() []checker.Segment {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.segs
}

func (w *rawWatcher) run(ctx context.Context) {
	rv := int64(-1)
	for ctx.Err() == nil {
		if rv < 0 {
			call := w.rec.now()
			code, body, err := w.c.do(ctx, "GET", w.coll, nil)
			ret := w.rec.now()
			var l linList
			if err != nil || code != http.StatusOK || json.Unmarshal(body, &l) != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if rv, err = strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64); err != nil {
				rv = -1
				continue
			}
			out, cl := linListOutput(l)
			w.rec.add(checker.Operation{Client: w.client, Input: checker.Input{Op: checker.OpList}, Output: out, Call: call, Return: ret})
			w.mu.Lock()
			w.lists = append(w.lists, cl)
			w.mu.Unlock()
		}
		seg, next, ok := w.watch(ctx, rv)
		if !ok {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		// Relist now and then by choice, as an informer may, so that
		// every history checks lists against the history at their
		// resourceVersion, 410 Gone or not.
		if next >= 0 && rand.IntN(4) == 0 {
			seg.Relist, next = true, -1
		}
		rv = next
		// Pause now and then before resuming, long enough for compaction
		// to pass the revision: the resume must then get 410 and relist.
		if rand.IntN(2) == 0 {
			time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond)
		}
		w.mu.Lock()
		w.segs = append(w.segs, seg)
		if rv > w.last {
			w.last = rv
		}
		w.mu.Unlock()
	}
}

// watch runs one watch connection from rv. It returns the segment, the
// revision to resume from (-1 to relist) and false when it never
// connected.
func (w *rawWatcher) watch(ctx context.Context, rv int64) (checker.Segment, int64, bool) {
	if w.ws != nil {
		return w.watchWS(ctx, rv)
	}
	seg := checker.Segment{StartRV: rv}
	path := fmt.Sprintf("%s?watch=true&resourceVersion=%d&allowWatchBookmarks=true&timeoutSeconds=%d", w.coll, rv, 1+rand.IntN(3))
	req, err := http.NewRequestWithContext(ctx, "GET", w.c.url+path, nil)
	if err != nil {
		return seg, rv, false
	}
	req.Header.Set("Authorization", "Bearer "+w.c.token)
	resp, err := w.c.client.Do(req)
	if err != nil {
		return seg, rv, false
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusGone {
		seg.Gone = true
		return seg, -1, true
	}
	if resp.StatusCode != http.StatusOK {
		return seg, rv, false
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev watchMessage
		if err := dec.Decode(&ev); err != nil {
			return seg, rv, true
		}
		var more bool
		if rv, more = w.record(&seg, rv, ev); !more {
			return seg, rv, true
		}
	}
}

type watchMessage struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// record adds one message to seg and returns the revision to resume from
// (-1 to relist) and whether the connection goes on.
func (w *rawWatcher) record(seg *checker.Segment, rv int64, ev watchMessage) (int64, bool) {
	if ev.Type == "ERROR" {
		var st struct {
			Code int `json:"code"`
		}
		if json.Unmarshal(ev.Object, &st) == nil && st.Code == http.StatusGone {
			seg.Gone = true
			return -1, false
		}
		return rv, false
	}
	var o linObject
	if err := json.Unmarshal(ev.Object, &o); err != nil {
		return rv, false
	}
	n, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		return rv, false
	}
	seg.Events = append(seg.Events, checker.WatchEvent{Type: ev.Type, Name: o.Metadata.Name, RV: n, Value: o.Data})
	rv = max(rv, n)
	w.mu.Lock()
	w.last = max(w.last, rv)
	w.mu.Unlock()
	return rv, true
}

// watchWS is watch over a WebSocket.
func (w *rawWatcher) watchWS(ctx context.Context, rv int64) (checker.Segment, int64, bool) {
	seg := checker.Segment{StartRV: rv}
	q := url.Values{"resourceVersion": {strconv.FormatInt(rv, 10)}, "allowWatchBookmarks": {"true"}, "timeoutSeconds": {strconv.Itoa(1 + rand.IntN(3))}}
	c, resp, err := w.ws.dial(w.coll, q, nil, wsTokenProtocol(w.ws.token), wsProtocol)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusGone {
			seg.Gone = true
			return seg, -1, true
		}
		return seg, rv, false
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	for {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var ev watchMessage
		if err := c.ReadJSON(&ev); err != nil {
			return seg, rv, true
		}
		var more bool
		if rv, more = w.record(&seg, rv, ev); !more {
			return seg, rv, true
		}
	}
}

// linInformer records what a client-go informer's handlers see.
type linInformer struct {
	inf cache.SharedIndexInformer
	mu  sync.Mutex // guards evs
	evs []checker.WatchEvent
}

func startLinInformer(t *testing.T, s *testserver.Server, ns string, stop <-chan struct{}) *linInformer {
	dc, err := dynamic.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil)
	li := &linInformer{inf: factory.ForResource(linGVR).Informer()}
	rec := func(typ string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		rv, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
		li.mu.Lock()
		defer li.mu.Unlock()
		li.evs = append(li.evs, checker.WatchEvent{Type: typ, Name: u.GetName(), RV: rv})
	}
	if _, err := li.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { rec(checker.Added, obj) },
		UpdateFunc: func(_, obj any) { rec(checker.Modified, obj) },
		DeleteFunc: func(obj any) { rec(checker.Deleted, obj) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(stop)
	t.Cleanup(factory.Shutdown)
	if !cache.WaitForCacheSync(stop, li.inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return li
}

func (li *linInformer) events() []checker.WatchEvent {
	li.mu.Lock()
	defer li.mu.Unlock()
	return li.evs
}

func (li *linInformer) store() map[string]string {
	got := map[string]string{}
	for _, o := range li.inf.GetStore().List() {
		u := o.(*unstructured.Unstructured)
		got[u.GetName()] = u.GetResourceVersion()
	}
	return got
}

// holds reports whether the informer's cache is exactly want (name to
// resourceVersion).
func (li *linInformer) holds(want map[string]string) bool {
	got := li.store()
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// checkersCatchInjectedFaults feeds the checkers this real history with
// one fault injected at a time and fails unless each is flagged: the
// checks passing means something only if these fail. Into the raw HTTP
// watch: an event dropped, two events swapped, an event delivered twice, a
// bookmark behind the event before it, a bookmark ahead of an event not
// yet delivered. Into a list the history made: an object newer than the
// list, a value no write put there. (Stale reads are injected into
// synthetic histories in test/checker: proving a long real history illegal
// takes porcupine minutes; so are lists missing an object, flagged only
// where a watch covered the interval.)
func checkersCatchInjectedFaults(t *testing.T, h int, rec *linRecorder, segs []checker.Segment, known []checker.Write, lists []checker.List, allSegs []checker.Segment) {
	byRV := map[int64]bool{}
	for _, w := range known {
		byRV[w.RV] = true
	}
	injected := false
	for i, sg := range segs {
		for j := 1; j+1 < len(sg.Events) && !injected; j++ {
			ev, next := sg.Events[j], sg.Events[j+1]
			// An event of a known write (a bookmark may carry its revision too).
			if ev.Type == checker.Bookmark || !byRV[ev.RV] || next.Type == checker.Bookmark {
				continue
			}
			injected = true
			faults := []struct {
				name   string
				events []checker.WatchEvent
			}{
				{"dropping event " + strconv.Itoa(j), slices.Delete(slices.Clone(sg.Events), j, j+1)},
				{"swapping events " + strconv.Itoa(j) + " and the next", slices.Concat(sg.Events[:j], []checker.WatchEvent{next, ev}, sg.Events[j+2:])},
				{"delivering event " + strconv.Itoa(j) + " twice", slices.Insert(slices.Clone(sg.Events), j+1, ev)},
				{"a bookmark behind event " + strconv.Itoa(j), slices.Insert(slices.Clone(sg.Events), j+1, checker.WatchEvent{Type: checker.Bookmark, RV: ev.RV - 1})},
				{"a bookmark ahead of event " + strconv.Itoa(j+1), slices.Insert(slices.Clone(sg.Events), j+1, checker.WatchEvent{Type: checker.Bookmark, RV: next.RV})},
			}
			for _, f := range faults {
				broken := slices.Clone(segs)
				broken[i].Events = f.events
				if checker.CheckWatch(broken, known, rec.attempted) == nil {
					t.Errorf("history %d: %s of connection %d passed the watch check", h, f.name, i)
				}
			}
		}
	}
	if !injected {
		t.Errorf("history %d: no watch event to inject a fault into", h)
	}
	// The list with the most objects (the final list is always there).
	l := slices.MaxFunc(lists, func(a, b checker.List) int { return len(a.Items) - len(b.Items) })
	newer := checker.List{RV: l.RV, Items: maps.Clone(l.Items)}
	newer.Items["k-injected"] = checker.Listed{RV: l.RV + 1, Value: "injected"}
	if checker.CheckList(newer, known, allSegs, rec.attempted) == nil {
		t.Errorf("history %d: an object newer than the list at %d passed the list check", h, l.RV)
	}
	for name, it := range l.Items {
		wrong := checker.List{RV: l.RV, Items: maps.Clone(l.Items)}
		wrong.Items[name] = checker.Listed{RV: it.RV, Value: it.Value + "-injected"}
		if checker.CheckList(wrong, known, allSegs, rec.attempted) == nil {
			t.Errorf("history %d: %s with a value never written passed the list check at %d", h, name, l.RV)
		}
		break
	}
}
