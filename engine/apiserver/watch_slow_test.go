package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestSlowHTTPWatcherIsCutOff opens a plain HTTP watch whose client never
// reads, on a kind whose initial list is far larger than the socket buffers
// hold, and checks that the server ends the watch (releasing what it holds)
// within WatchWriteTimeout rather than keeping it, and its backlog, open for
// as long as the client stays connected.
func TestSlowHTTPWatcherIsCutOff(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const writeTimeout = 300 * time.Millisecond
	eng, api := newTestAPI(t, db, Options{WatchWriteTimeout: writeTimeout})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	defer func() { cancel(); <-done }()

	ended := make(chan time.Time, 4)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r)
		if r.URL.Query().Get("watch") == "true" {
			ended <- time.Now()
		}
	}))
	defer hs.Close()
	ts := &testServer{Server: hs, api: api, eng: eng, db: db}
	ts.registerBlobs(t)

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
