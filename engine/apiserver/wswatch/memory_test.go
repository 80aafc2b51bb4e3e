package wswatch_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
)

// idleWatchers opens n WebSocket watches that stay idle and returns the
// server-side memory they hold, in bytes per watcher. The clients are raw
// sockets that did the handshake by hand, so that they hold next to nothing
// in this process and the figure is the server's: its connection goroutine
// (which reads), the pump goroutine of a plain channel watch, buffers and
// timers.
//
// With detached, the handler opens each connection with Open and returns,
// as the REST handler does: then the HTTP server's goroutine and buffers
// go, and the connection's reader is the one goroutine left besides the
// watch's (the test's channel watch has a pump too).
func idleWatchers(tb testing.TB, n int, detached bool) float64 {
	tb.Helper()
	ws, err := wswatch.New(wswatch.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	shutdown, stop := context.WithCancel(context.Background())
	defer stop()
	var open sync.WaitGroup
	defer open.Wait()
	start := func(ctx context.Context) (watch.Interface, error) { return newChanWatch(0), nil }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if detached {
			open.Add(1)
			if err := ws.Open(shutdown, w, r, start, wswatch.Conversion{}, func(error) { open.Done() }); err != nil {
				open.Done()
			}
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(shutdown, cancel)()
		_ = ws.Serve(w, r.WithContext(ctx), start)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	before := heap()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	req := "GET /apis/example.setpoint.dev/v1/widgets?watch=true HTTP/1.1\r\nHost: " + addr +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: " + wswatch.Subprotocol + "\r\n\r\n"
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			tb.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(req)); err != nil {
			tb.Fatal(err)
		}
		// Read the 101 response byte by byte so no buffer outlives it.
		br := bufio.NewReaderSize(c, 16)
		var resp strings.Builder
		for !strings.HasSuffix(resp.String(), "\r\n\r\n") {
			b, err := br.ReadByte()
			if err != nil {
				tb.Fatalf("handshake %d: %v", i, err)
			}
			resp.WriteByte(b)
		}
		if !strings.HasPrefix(resp.String(), "HTTP/1.1 101") {
			tb.Fatalf("handshake %d: %s", i, resp.String())
		}
		_ = c.SetDeadline(time.Time{})
	}
	after := heap()
	per := float64(after-before) / float64(n)
	stop() // the server closes every watch with 1001 before srv.Close
	return per
}

// heap is the memory in use by the heap and goroutine stacks after a GC.
func heap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

func TestIdleWatcherMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector inflates memory figures; run without -race")
	}
	const n = 500
	for _, tc := range []struct {
		name     string
		detached bool
		max      float64
	}{
		// About 28 KB is measured served by the handler (net/http's
		// connection and handler goroutine, which reads, the pump
		// goroutine of the test's channel watch, gorilla's connection;
		// the engine's watches need no pump); 48 KB leaves room for
		// noise and still keeps 10,000 watchers under 500 MB on this
		// side.
		{name: "served", max: 48 << 10},
		// Detached, the request's goroutine and the HTTP server's
		// buffers go: about 8 KB is measured, 16 KB leaves room.
		{name: "detached", detached: true, max: 16 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			per := idleWatchers(t, n, tc.detached)
			t.Logf("%.0f bytes per idle watcher (server side, plain HTTP, %d watchers)", per, n)
			if per > tc.max {
				t.Fatalf("%.0f bytes per idle watcher, want under %.0f", per, tc.max)
			}
		})
	}
}

func BenchmarkIdleWatchers(b *testing.B) {
	for _, detached := range []bool{false, true} {
		for _, n := range []int{1000, 5000} {
			b.Run(fmt.Sprintf("detached=%v/%d", detached, n), func(b *testing.B) {
				var per float64
				for i := 0; i < b.N; i++ {
					per = idleWatchers(b, n, detached)
				}
				b.ReportMetric(per, "bytes/watcher")
			})
		}
	}
}
