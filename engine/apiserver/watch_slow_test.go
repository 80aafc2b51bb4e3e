package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestSlowHTTPWatcherIsCutOff opens a plain HTTP watch whose client never
// reads, on a kind whose initial list is far larger than the socket buffers
// hold, and checks that the server ends the watch (releasing what it holds)
// within WatchWriteTimeout rather than keeping it, and its backlog, open for
// as long as the client stays connected.
func TestSlowHTTPWatcherIsCutOff(t *testing.T) {
	hs, ts, ended := startSlowWatchServer(t, func(hs *httptest.Server) { hs.Start() })

	// 16 objects of 1 MiB: far more than loopback socket buffers take.
	big := strings.Repeat("x", 1<<20)
	for i := range 16 {
		ts.mustDo(t, http.StatusCreated, request{method: "POST", path: blobsPath, body: blobJSON(fmt.Sprintf("b%d", i), big)})
	}

	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET %s?watch=true HTTP/1.1\r\nHost: test\r\n\r\n", blobsPath)
	start := time.Now()
	// The client reads nothing from here on.
	select {
	case at := <-ended:
		t.Logf("the watch of a client that stopped reading ended after %v (write timeout %v)", at.Sub(start).Round(time.Millisecond), writeTimeout)
	case <-time.After(20 * time.Second):
		t.Fatalf("the watch of a client that reads nothing is still open after 20s (write timeout %v)", writeTimeout)
	}
}

const blobsPath = "/apis/test.setpoint.dev/v1/namespaces/default/blobs"

// writeTimeout is the slow-watcher tests' WatchWriteTimeout.
const writeTimeout = 300 * time.Millisecond

// startSlowWatchServer starts an engine on Badger with writeTimeout and an
// API server in front of it, started by start, with Blob registered; ended
// receives the time each watch request ends. Everything stops with t.
func startSlowWatchServer(t *testing.T, start func(*httptest.Server)) (*httptest.Server, *testServer, <-chan time.Time) {
	t.Helper()
	return startWatchServer(t, badger.Options{}, writeTimeout, start)
}

// startWatchServer is startSlowWatchServer with the store's options and
// the write timeout given.
func startWatchServer(t *testing.T, dbOpts badger.Options, writeTimeout time.Duration, start func(*httptest.Server)) (*httptest.Server, *testServer, <-chan time.Time) {
	t.Helper()
	db, err := badger.Open(t.TempDir(), dbOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng, api := newTestAPI(t, db, Options{WatchWriteTimeout: writeTimeout})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	ended := make(chan time.Time, 4)
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r)
		if r.URL.Query().Get("watch") == "true" {
			ended <- time.Now()
		}
	}))
	start(hs)
	t.Cleanup(hs.Close)
	ts := &testServer{Server: hs, api: api, eng: eng, db: db}
	ts.registerBlobs(t)
	return hs, ts, ended
}

// registerBlobs registers Blob, a kind with one free-form string field, data,
// for tests that need objects of a chosen size.
func (ts *testServer) registerBlobs(t *testing.T) {
	t.Helper()
	crd := testsupport.CRD{Group: "test.setpoint.dev", Kind: "Blob",
		Schema: `{"type":"object","properties":{"data":{"type":"string"}}}`}
	ts.mustDo(t, http.StatusCreated, request{method: "POST", path: crdPath, body: crd.String()})
	testsupport.Eventually(t, 10*time.Second, "blobs to be served", func() bool {
		code, _, _ := ts.do(t, request{path: blobsPath})
		return code == http.StatusOK
	})
}

func blobJSON(name, data string) string {
	return fmt.Sprintf(`{"apiVersion":"test.setpoint.dev/v1","kind":"Blob","metadata":{"name":%q},"data":%q}`, name, data)
}

// TestSlowHTTP2WatcherIsCutOff is TestSlowHTTPWatcherIsCutOff over HTTP/2,
// served as the server serves it (serving.ConfigureHTTP2): a watch whose
// client leaves its stream's flow-control window spent ends within
// WatchWriteTimeout, counted as slow, and the connection's other streams
// are served meanwhile.
func TestSlowHTTP2WatcherIsCutOff(t *testing.T) {
	hs, ts, ended := startSlowWatchServer(t, func(hs *httptest.Server) {
		if err := serving.ConfigureHTTP2(hs.Config); err != nil {
			t.Fatal(err)
		}
		hs.TLS = hs.Config.TLSConfig
		hs.StartTLS()
	})
	big := strings.Repeat("x", 256<<10)
	for i := range 4 {
		ts.mustDo(t, http.StatusCreated, request{method: "POST", path: blobsPath, body: blobJSON(fmt.Sprintf("b%d", i), big)})
	}

	// One connection whose streams take 64 KiB each before their reader
	// must read.
	cc := testsupport.HTTP2ClientConn(t, hs, 64<<10)
	defer cc.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer rcancel()
	req, _ := http.NewRequestWithContext(rctx, "GET", hs.URL+blobsPath+"?watch=true", nil)
	start := time.Now()
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The client reads nothing of the watch from here on; a GET on the
	// same connection is still answered.
	get, _ := http.NewRequestWithContext(rctx, "GET", hs.URL+blobsPath+"/b0", nil)
	if r, err := cc.RoundTrip(get); err != nil {
		t.Errorf("GET beside the stalled watch: %v", err)
	} else {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Errorf("GET beside the stalled watch: %s", r.Status)
		}
	}
	select {
	case at := <-ended:
		t.Logf("the HTTP/2 watch of a client that stopped reading ended after %v (write timeout %v)", at.Sub(start).Round(time.Millisecond), writeTimeout)
	case <-rctx.Done():
		t.Fatalf("the HTTP/2 watch of a client that reads nothing is still open after 20s (write timeout %v)", writeTimeout)
	}
	if n := testutil.ToFloat64(ts.api.slowClosed.WithLabelValues("http")); n != 1 {
		t.Errorf("slow watches closed over http: %v, want 1", n)
	}
}

// TestSlowHTTPWatcherFlushTimeoutIsCounted stalls a plain HTTP watch
// served, as the server serves it, behind serving.Instrument, whose
// response wrapper offers a Flush that returns no error, on events small
// enough that only the flush after each one reaches the connection: the
// flush is the write that runs into the deadline. The watch must end as
// slow, counted once, not as a client that went away.
func TestSlowHTTPWatcherFlushTimeoutIsCounted(t *testing.T) {
	hs, ts, ended := startSlowWatchServer(t, func(hs *httptest.Server) {
		hs.Config.Handler = serving.Instrument(hs.Config.Handler, serving.InstrumentOptions{Logger: slog.New(slog.DiscardHandler)})
		hs.Listener = smallSendBuffer{hs.Listener}
		hs.Start()
	})
	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET %s?watch=true HTTP/1.1\r\nHost: test\r\n\r\n", blobsPath)
	// The client reads nothing from here on. Events of about 600 bytes,
	// one at a time: each waits in the response's buffer until its flush.
	data := strings.Repeat("x", 512)
	start := time.Now()
	for i := 0; ; i++ {
		select {
		case at := <-ended:
			t.Logf("the watch ended after %v and %d events (write timeout %v)", at.Sub(start).Round(time.Millisecond), i, writeTimeout)
			if n := testutil.ToFloat64(ts.api.slowClosed.WithLabelValues("http")); n != 1 {
				t.Errorf("slow watches closed over http: %v, want 1", n)
			}
			return
		default:
		}
		if i == 2000 || time.Since(start) > 20*time.Second {
			t.Fatalf("the watch of a client that reads nothing is still open after %d events, %v (write timeout %v)", i, time.Since(start).Round(time.Millisecond), writeTimeout)
		}
		ts.mustDo(t, http.StatusCreated, request{method: "POST", path: blobsPath, body: blobJSON(fmt.Sprintf("s%d", i), data)})
	}
}

// smallSendBuffer is a listener whose connections take a few KiB before a
// write to them blocks, rather than the kernel's autotuned megabytes.
type smallSendBuffer struct{ net.Listener }

func (l smallSendBuffer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestHTTPStreamFlushPastDeadlineFails writes small events, each flushed
// on its own, to a client that reads nothing, through serving.Instrument's
// response wrapper, whose Flush returns no error: the events wait in the
// response's buffers until their flush, so the flush is the write that runs
// into the deadline, and it must report the failure (the stream is slow)
// rather than pass it to a later write, or to none when the watch ends on
// the context that the failed write canceled.
func TestHTTPStreamFlushPastDeadlineFails(t *testing.T) {
	failed := make(chan string, 1)
	hs := httptest.NewUnstartedServer(serving.Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := newHTTPStream(w, writeTimeout)
		st.deadlines = st.rc.SetWriteDeadline(time.Time{}) == nil
		defer st.stop()
		w.WriteHeader(http.StatusOK)
		event := []byte(strings.Repeat("x", 600))
		for range 1 << 16 { // 39 MiB: far more than the socket buffers take
			if !st.write(event) {
				failed <- fmt.Sprintf("write (missed %v)", st.missed())
				return
			}
			if !st.flush() {
				failed <- fmt.Sprintf("flush (missed %v)", st.missed())
				return
			}
		}
		failed <- "none"
	}), serving.InstrumentOptions{Logger: slog.New(slog.DiscardHandler)}))
	hs.Listener = smallSendBuffer{hs.Listener}
	hs.Start()
	defer hs.Close()
	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: test\r\n\r\n")
	select {
	case got := <-failed:
		if want := "flush (missed true)"; got != want {
			t.Errorf("failed in %s, want %s", got, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stream to a client that reads nothing still writes after 20s")
	}
}

// TestHTTPWatchCutOffByStoreIsCounted stalls a plain HTTP watch, whose
// write timeout is far off, until the store's buffer for it (8 events)
// overflows and the store ends it, then reads it: the stream ends with the
// 410 ERROR event that says the watch fell behind, and the watch is
// counted as ended for a slow client.
func TestHTTPWatchCutOffByStoreIsCounted(t *testing.T) {
	hs, ts, ended := startWatchServer(t, badger.Options{WatchBuffer: 8}, time.Minute, func(hs *httptest.Server) {
		hs.Listener = smallSendBuffer{hs.Listener}
		hs.Start()
	})
	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET %s?watch=true HTTP/1.1\r\nHost: test\r\n\r\n", blobsPath)
	// The writes block after a few events; the store's buffer fills
	// behind them.
	data := strings.Repeat("x", 4<<10)
	for i := range 48 {
		ts.mustDo(t, http.StatusCreated, request{method: "POST", path: blobsPath, body: blobJSON(fmt.Sprintf("o%d", i), data)})
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	var last metav1.WatchEvent
	events := 0
	dec := json.NewDecoder(resp.Body)
	for {
		var ev metav1.WatchEvent
		if err := dec.Decode(&ev); err != nil {
			if err != io.EOF {
				t.Fatalf("after %d events: %v", events, err)
			}
			break
		}
		events++
		last = ev
	}
	if events >= 48 {
		t.Fatalf("the watch sent all %d events: the store never cut it off", events)
	}
	t.Logf("the store cut the watch off after %d of 48 events", events)
	var st metav1.Status
	if err := json.Unmarshal(last.Object.Raw, &st); last.Type != string(watch.Error) || err != nil || st.Code != http.StatusGone {
		t.Fatalf("last of %d events: %s %s, want the 410 ERROR", events, last.Type, last.Object.Raw)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch request did not end after its last event")
	}
	if n := testutil.ToFloat64(ts.api.slowClosed.WithLabelValues("http")); n != 1 {
		t.Errorf("slow watches closed over http: %v, want 1", n)
	}
}

// TestWatchFellBehindReportsStoreOverflow checks what both transports count
// on: an engine watch that nobody reads while the store's buffer for it
// overflows ends with the 410 ERROR event and reports
// store.ErrWatcherTooSlow, whichever way it is then stopped; one stopped
// before does not.
func TestWatchFellBehindReportsStoreOverflow(t *testing.T) {
	_, ts, _ := startWatchServer(t, badger.Options{WatchBuffer: 8}, writeTimeout, func(hs *httptest.Server) { hs.Start() })
	gvr := schema.GroupVersionResource{Group: "test.setpoint.dev", Version: "v1", Resource: "blobs"}
	ctx := t.Context()
	stopped, err := ts.eng.Watch(ctx, gvr, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stopped.Stop()
	if fellBehind(stopped) {
		t.Error("a watch stopped by its consumer fell behind")
	}
	if fellBehind(nil) {
		t.Error("a watch that did not start fell behind")
	}

	wi, err := ts.eng.Watch(ctx, gvr, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wi.Stop()
	const n = 64
	for i := range n {
		ts.mustDo(t, http.StatusCreated, request{method: "POST", path: blobsPath, body: blobJSON(fmt.Sprintf("f%d", i), "x")})
	}
	var last watch.Event
	got := 0
	timeout := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-wi.ResultChan():
			if !ok {
				done = true
				break
			}
			got++
			last = ev
		case <-timeout:
			t.Fatalf("the watch still runs after %d events", got)
		}
	}
	wi.Stop()
	if st, ok := last.Object.(*metav1.Status); got >= n || last.Type != watch.Error || !ok || st.Code != http.StatusGone {
		t.Fatalf("%d of %d events, the last %s %v: want fewer, ending with the 410 ERROR", got, n, last.Type, last.Object)
	}
	if !fellBehind(wi) {
		t.Error("the watch the store cut off did not fall behind")
	}
}
