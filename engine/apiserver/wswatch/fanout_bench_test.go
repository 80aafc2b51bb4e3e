package wswatch_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
)

// BenchmarkFanOut measures one event delivered to N WebSocket connections
// (plain TCP on loopback, clients in this process): per op, the event is
// handed to every connection's watch, encoded once, queued, written, and
// read by every client. "sink" watches hand events to the session as the
// engine's do; "channel" watches go through the pump goroutine. Events are
// written as soon as they are queued (WriteInterval 1ns), so each op pays
// for one write per connection; cpu-ns/delivery is the CPU time of the
// whole process (server and clients) per delivery.
func BenchmarkFanOut(b *testing.B) {
	for _, src := range sources {
		for _, n := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/conns=%d", src.name, n), func(b *testing.B) {
				benchFanOut(b, src.new, n)
			})
		}
	}
}

func benchFanOut(b *testing.B, newSource func() source, n int) {
	var mu sync.Mutex
	var watches []source
	ws, err := wswatch.New(wswatch.Options{WriteInterval: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	h := &harness{results: make(chan error, n), start: func(context.Context) (watch.Interface, error) {
		w := newSource()
		mu.Lock()
		watches = append(watches, w)
		mu.Unlock()
		return w, nil
	}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.results <- ws.Serve(w, r, h.start)
	}))
	defer h.srv.Close()
	var got atomic.Int64
	var readers sync.WaitGroup
	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		readers.Wait()
	}()
	for i := 0; i < n; i++ {
		c, _, err := h.dial(nil)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				if _, _, err := c.NextReader(); err != nil {
					return
				}
				got.Add(1)
			}
		}()
	}
	for connected := time.Now().Add(30 * time.Second); ; {
		mu.Lock()
		ready := len(watches)
		mu.Unlock()
		if ready == n {
			break
		}
		if time.Now().After(connected) {
			b.Fatalf("%d of %d watches started after 30 s", ready, n)
		}
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		ev := watch.Event{Type: watch.Modified, Object: widget("w", i+1, 300)}
		for _, w := range watches {
			if !w.send(ev, 5*time.Second) {
				b.Fatal("watch stopped")
			}
		}
		// Every delivery of this op arrives well within a second; a lost one
		// fails the benchmark instead of hanging it.
		deadline := time.Now().Add(10 * time.Second)
		for want := int64(i+1) * int64(n); got.Load() < want; {
			if time.Now().After(deadline) {
				b.Fatalf("op %d: %d of %d deliveries after 10 s", i, got.Load()-int64(i)*int64(n), n)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/float64(n), "cpu-ns/delivery")
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
