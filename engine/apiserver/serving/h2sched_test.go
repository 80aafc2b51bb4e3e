package serving

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// Over a real HTTP/2 connection served with the scheduler: a stream whose
// client stops reading (its flow-control window spent) holds up neither the
// other streams nor a PING, and once the client resets it the connection
// goes on.
func TestHTTP2SchedulerStalledStream(t *testing.T) {
	var scheds atomic.Int32
	stalled := make(chan int, 64) // the stalled handler's writes, as each starts
	stallDone := make(chan error, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 4<<10)
		if r.URL.Path == "/stall" {
			for i := 0; ; i++ {
				stalled <- i
				if _, err := w.Write(chunk); err != nil {
					stallDone <- err
					return
				}
				w.(http.Flusher).Flush()
			}
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("chunks"))
		for range n {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	if err := configureHTTP2(srv.Config, func() http2.WriteScheduler {
		scheds.Add(1)
		return NewWriteScheduler()
	}); err != nil {
		t.Fatal(err)
	}
	srv.TLS = srv.Config.TLSConfig
	srv.StartTLS()
	defer srv.Close()

	// A client with a 16 KiB window per stream, so that 4 chunks unread
	// stall a stream.
	cc := testsupport.HTTP2ClientConn(t, srv, 16<<10)
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		return cc.RoundTrip(req)
	}

	stall, err := get("/stall")
	if err != nil {
		t.Fatal(err)
	}
	// Its fifth write waits for window: 16 KiB are out, none read.
	for i := 0; i < 4; {
		select {
		case i = <-stalled:
		case <-ctx.Done():
			t.Fatal("the stalled stream's handler did not write")
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() {
			resp, err := get("/?chunks=64") // 256 KiB, 16 windows' worth
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			n, err := io.Copy(io.Discard, resp.Body)
			if err == nil && n != 64*4<<10 {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				errs <- err
			}
		})
	}
	if err := cc.Ping(ctx); err != nil {
		t.Errorf("PING with a stalled stream: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a stream beside the stalled one: %v", err)
	}

	// The client resets the stalled stream: its handler's write fails, and
	// the connection serves on.
	stall.Body.Close()
	select {
	case <-stallDone:
	case <-ctx.Done():
		t.Fatal("the reset stream's handler was not told")
	}
	resp, err := get("/?chunks=8")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != 8*4<<10 {
		t.Errorf("after the reset: %d bytes, %v", n, err)
	}
	resp.Body.Close()
	if n := scheds.Load(); n != 1 {
		t.Errorf("%d write schedulers made for the one connection, want 1", n)
	}
}
