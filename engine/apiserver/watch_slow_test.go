package apiserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

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
	db, err := badger.Open(t.TempDir(), badger.Options{})
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
