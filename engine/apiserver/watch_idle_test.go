package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/badger"
)

// TestIdleHTTP2WatchStaysOpen opens a watch over HTTP/2, as kubectl and
// client-go do, leaves it without events for several times
// WatchWriteTimeout, and checks that it then delivers the next event: the
// write timeout ends watches whose client stops reading, not watches that
// have nothing to send.
func TestIdleHTTP2WatchStaysOpen(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const writeTimeout = 200 * time.Millisecond
	eng, api := newTestAPI(t, db, Options{WatchWriteTimeout: writeTimeout})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	defer func() { cancel(); <-done }()

	hs := httptest.NewUnstartedServer(api)
	hs.EnableHTTP2 = true
	hs.StartTLS()
	defer hs.Close()
	ts := &testServer{Server: hs, api: api, eng: eng, db: db}
	ts.registerBlobs(t)

	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	req, err := http.NewRequestWithContext(wctx, http.MethodGet, hs.URL+blobsPath+"?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %s over %s, want 200 over HTTP/2", resp.Status, resp.Proto)
	}
	events := make(chan string, 4)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct{ Name string } `json:"metadata"`
					Message  string                `json:"message"`
				} `json:"object"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev.Type + " " + ev.Object.Metadata.Name + ev.Object.Message
			}
		}
		if sc.Err() != nil {
			events <- "read: " + sc.Err().Error()
		}
	}()
	// Idle for several write timeouts (the point of the test is the wait).
	time.Sleep(5 * writeTimeout)
	ts.mustDo(t, http.StatusCreated, request{method: "POST", path: blobsPath, body: blobJSON("late", "x")})
	select {
	case ev, ok := <-events:
		if ev != "ADDED late" {
			t.Fatalf("after %v idle the watch gave %q (open %v), want ADDED late", 5*writeTimeout, ev, ok)
		}
	case <-wctx.Done():
		t.Fatal("no event within 20s")
	}
}
