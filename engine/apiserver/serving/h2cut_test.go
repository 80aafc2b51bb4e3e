package serving

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// A request whose client stops reading its response is cut off at the
// request timeout plus statusGrace over HTTP/2 (the stream is reset, the
// connection serves on) and over HTTP/1.1 (the write deadline fails the
// handler's write), and a request that ends in time is not cut afterwards.
func TestLimitCutsStalledResponse(t *testing.T) {
	const timeout = 200 * time.Millisecond
	cutAt := timeout + statusGrace(timeout)
	type result struct {
		proto   int
		err     error
		elapsed time.Duration
	}
	results := make(chan result, 1)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stall") == "" {
			_, _ = w.Write([]byte("{}"))
			return
		}
		t0 := time.Now()
		chunk := make([]byte, 4<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				results <- result{r.ProtoMajor, err, time.Since(t0)}
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	srv := httptest.NewUnstartedServer(NewHandler(HandlerOptions{API: api, Token: testToken, Logger: quiet,
		Limits: LimitOptions{RequestTimeout: timeout}}))
	if err := ConfigureHTTP2(srv.Config); err != nil {
		t.Fatal(err)
	}
	srv.TLS = srv.Config.TLSConfig
	srv.StartTLS()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	h2 := testsupport.HTTP2ClientConn(t, srv, 16<<10)
	defer h2.Close()
	h1 := srv.Client().Transport.(*http.Transport).Clone()
	h1.TLSClientConfig.NextProtos = []string{"http/1.1"}
	defer h1.CloseIdleConnections()

	for _, c := range []struct {
		name  string
		proto int
		rt    http.RoundTripper
	}{{"HTTP/2", 2, h2}, {"HTTP/1.1", 1, h1}} {
		t.Run(c.name, func(t *testing.T) {
			get := func(query string) *http.Response {
				t.Helper()
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/apis/example.setpoint.dev/v1/widgets"+query, nil)
				req.Header.Set("Authorization", "Bearer "+testToken)
				resp, err := c.rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.ProtoMajor != c.proto {
					t.Fatalf("served over %s, want HTTP/%d", resp.Proto, c.proto)
				}
				return resp
			}
			stalled := get("?stall=1")
			defer stalled.Body.Close()
			select {
			case res := <-results:
				if res.err == nil || res.proto != c.proto {
					t.Fatalf("handler's write: %v over HTTP/%d", res.err, res.proto)
				}
				if res.elapsed < cutAt-20*time.Millisecond {
					t.Errorf("cut after %v, want the timeout and its grace, %v", res.elapsed, cutAt)
				}
			case <-ctx.Done():
				t.Fatal("a response nobody reads was never cut off")
			}
			if _, err := io.Copy(io.Discard, stalled.Body); err == nil {
				t.Error("the client read the cut-off response to its end without an error")
			}
			// Requests that end in time on the same transport stay whole.
			for range 3 {
				resp := get("")
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != "{}" {
					t.Fatalf("a request after the cut: %q, %v", b, err)
				}
			}
		})
	}
}

// stop, once returned, keeps a cut from using the response controller (its
// handler has returned), whether the timer fired before or not; a cut that
// is not stopped sets a deadline already past, which resets the stream.
func TestStreamCutStop(t *testing.T) {
	var returned, late atomic.Bool
	cuts := make(chan time.Time, 1)
	w := &deadlineWriter{set: func(d time.Time) {
		if returned.Load() {
			late.Store(true)
		}
		select {
		case cuts <- d:
		default:
		}
	}}
	rc := http.NewResponseController(w)
	for range 2000 {
		returned.Store(false)
		c := cutStreamAt(rc, time.Now())
		c.stop()
		returned.Store(true)
	}
	if late.Load() {
		t.Fatal("a cut used the response controller after stop returned")
	}
	select {
	case <-cuts:
	default:
	}

	returned.Store(false)
	cutStreamAt(rc, time.Now().Add(10*time.Millisecond))
	select {
	case d := <-cuts:
		if !d.Before(time.Now()) {
			t.Errorf("cut set the deadline %v, want one already past", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cut that was not stopped never came")
	}
}

type deadlineWriter struct {
	httptest.ResponseRecorder
	set func(time.Time)
}

func (w *deadlineWriter) SetWriteDeadline(d time.Time) error {
	w.set(d)
	return nil
}
