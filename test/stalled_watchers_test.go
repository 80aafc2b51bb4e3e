package test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// smallReceiveBuffer is a dialer whose sockets take little before they stop
// the sender: a client that stops reading is then stalled after a few
// events rather than after the kernel's autotuned megabytes.
func smallReceiveBuffer() *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
}

// TestStalledWatchersKeepMemoryBounded opens 1,000 watches over HTTP/1.1
// and 20 over WebSocket on one kind, none of which ever reads, while a
// writer creates objects of 4 KiB. The server must end each of them (the
// HTTP ones after --watch-write-timeout, the WebSocket ones when their
// queue fills), count them in setpoint_apiserver_slow_watches_closed_total,
// keep answering other clients, and keep its peak RSS (VmHWM) within a
// bound above what it held before; the figures are printed. The writer
// stops once every HTTP watch is closed, at most maxWrites: a watch that
// has nothing to send is never slow.
func TestStalledWatchersKeepMemoryBounded(t *testing.T) {
	const (
		httpWatches = 1000
		wsWatches   = 20
		maxWrites   = 4000
		// The 1,000 TLS connections alone take about 90 MiB; the shared
		// encode cache up to 64 MiB; the rest is the Go heap's headroom.
		boundMiB = 400
	)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if want := uint64(4 * (httpWatches + wsWatches)); lim.Cur < want {
		lim.Cur = min(want, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < want {
			t.Skipf("cannot raise the open-file limit to %d for %d watches: %v (limit %d)", want, httpWatches+wsWatches, err, lim.Cur)
		}
	}
	n := strconv.Itoa(4 * (httpWatches + wsWatches))
	s := testserver.Start(t, testserver.Options{Args: []string{
		"--watch-write-timeout", "1s",
		"--max-watches", n, "--max-connections", n, "--max-connections-per-address", n,
	}})
	pid := s.Pid()
	post := func(path, body string) {
		t.Helper()
		code, b, err := s.Do(http.MethodPost, path, s.Token, strings.NewReader(body))
		if err != nil || code != http.StatusCreated {
			t.Fatalf("POST %s: %d %.300s %v", path, code, b, err)
		}
	}
	post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", blobCRD)
	post("/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"stall"}}`)
	const blobs = "/apis/test.setpoint.dev/v1/namespaces/stall/blobs"
	testsupport.Eventually(t, 30*time.Second, "blobs served", func() bool {
		code, _, _ := s.Do(http.MethodGet, blobs, s.Token, nil)
		return code == http.StatusOK
	})

	base := procKiB(t, pid, "VmRSS")
	resetPeak(t, pid)
	start := time.Now()

	// WebSocket watches that never read.
	wsDialer := websocket.Dialer{
		TLSClientConfig:  &tls.Config{RootCAs: s.CAPool, MinVersion: tls.VersionTLS12},
		HandshakeTimeout: 10 * time.Second,
		NetDialContext:   smallReceiveBuffer().DialContext,
		Subprotocols:     []string{wsTokenProtocol(s.Token), wsProtocol},
	}
	var wsConns []*websocket.Conn
	defer func() {
		for _, c := range wsConns {
			c.Close()
		}
	}()
	for range wsWatches {
		c, resp, err := wsDialer.Dial("wss"+strings.TrimPrefix(s.URL, "https")+blobs+"?watch=true", nil)
		if err != nil {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			t.Fatalf("WebSocket watch: %v (HTTP %d)", err, code)
		}
		wsConns = append(wsConns, c)
	}
	// Enough objects for the WebSocket watches to stall now, so that their
	// 10s write timeout runs while the HTTP watches are opened.
	data := strings.Repeat("x", 4<<10)
	const preWrites = 200
	for i := range preWrites {
		post(blobs, fmt.Sprintf(`{"apiVersion":"test.setpoint.dev/v1","kind":"Blob","metadata":{"name":"p%d"},"data":%q}`, i, data))
	}

	// Plain watches, one HTTP/1.1 connection each, that never read.
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: s.CAPool, MinVersion: tls.VersionTLS12},
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		DialContext:         smallReceiveBuffer().DialContext,
		MaxIdleConnsPerHost: -1,
	}
	defer transport.CloseIdleConnections()
	// Bounds the watches' whole life: opening them (20 s on a loaded
	// machine), the writes until the server closed them (at most 25 s,
	// then 5 s) and reading their streams to the end (at most 15 s). Each
	// step ends as soon as it is done; a deadline shorter than their sum
	// cut the streams before the clients read them.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bodies := make([]io.ReadCloser, httpWatches)
	var openErr atomic.Value
	var wg sync.WaitGroup
	next := atomic.Int32{}
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < httpWatches; i = int(next.Add(1)) - 1 {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+blobs+"?watch=true", nil)
				req.Header.Set("Authorization", "Bearer "+s.Token)
				resp, err := transport.RoundTrip(req)
				if err == nil && resp.StatusCode != http.StatusOK {
					resp.Body.Close()
					err = fmt.Errorf("watch %d: HTTP %d", i, resp.StatusCode)
				}
				if err != nil {
					openErr.CompareAndSwap(nil, err)
					return
				}
				bodies[i] = resp.Body
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, b := range bodies {
			if b != nil {
				b.Close()
			}
		}
	}()
	if err := openErr.Load(); err != nil {
		t.Fatalf("opening %d watches: %v", httpWatches, err)
	}
	opened := time.Since(start)
	openRSS := procKiB(t, pid, "VmRSS")

	// A writer makes objects of 4 KiB until the server has ended every
	// watch, or maxWrites.
	const closed = "setpoint_apiserver_slow_watches_closed_total"
	writeClient := s.HTTPClient()
	defer writeClient.CloseIdleConnections()
	var writes atomic.Int32
	var writeErr atomic.Value
	writeStart := time.Now()
	done := make(chan struct{})
	var writers sync.WaitGroup
	for range 4 {
		writers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				i := writes.Add(1)
				if i > maxWrites {
					return
				}
				// About 250 writes a second in all: a steady load, not
				// a burst that outruns the watches' timeouts.
				time.Sleep(16 * time.Millisecond)
				body := fmt.Sprintf(`{"apiVersion":"test.setpoint.dev/v1","kind":"Blob","metadata":{"name":"b%d"},"data":%q}`, i, data)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+blobs, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+s.Token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := writeClient.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						err = fmt.Errorf("create b%d: HTTP %d", i, resp.StatusCode)
					}
				}
				if err != nil {
					writeErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	var h, w float64
	var hAt time.Duration // when the last HTTP watch was closed
	// The writer stops once every HTTP watch is closed; a stalled
	// WebSocket watch is closed when its write times out (10s).
	stopped := false
	for deadline := time.Now().Add(25 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		h, w = serverMetric(t, s, closed, `transport="http"`), serverMetric(t, s, closed, `transport="websocket"`)
		if h >= httpWatches && hAt == 0 {
			hAt = time.Since(writeStart)
		}
		if h >= httpWatches && !stopped {
			stopped = true
			close(done)
		}
		if h >= httpWatches && w >= wsWatches || time.Now().After(deadline) {
			break
		}
	}
	if !stopped {
		close(done)
	}
	writers.Wait()
	// A watch blocked in a write when the writer stopped is closed within
	// --watch-write-timeout all the same.
	for deadline := time.Now().Add(5 * time.Second); (h < httpWatches || w < wsWatches) && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		h, w = serverMetric(t, s, closed, `transport="http"`), serverMetric(t, s, closed, `transport="websocket"`)
	}
	if err := writeErr.Load(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	took := time.Since(writeStart)
	written := min(int(writes.Load()), maxWrites)
	peak := procKiB(t, pid, "VmHWM")
	t.Logf("%d HTTP and %d WebSocket watches opened in %v (server RSS %d MiB before, %d MiB with them open)",
		httpWatches, wsWatches, opened.Round(time.Millisecond), base>>10, openRSS>>10)
	t.Logf("%d writes of 4 KiB in %v; the server closed %.0f HTTP (all by %v) and %.0f WebSocket watches as too slow",
		written, took.Round(time.Millisecond), h, hAt.Round(time.Millisecond), w)
	t.Logf("server peak RSS %d MiB (+%d MiB over %d MiB before; bound +%d MiB)", peak>>10, (peak-base)>>10, base>>10, boundMiB)
	// Every stream must end (checked on the client's side below); the
	// metric must count nearly all of them as slow, however each ended: a
	// write or flush past the deadline, the request's context that the
	// failed write canceled, or the store cutting off a watch that fell
	// behind.
	if h < httpWatches*99/100 {
		t.Errorf("the server closed %.0f of %d stalled HTTP watches as slow, want at least 99%% (--watch-write-timeout 1s)", h, httpWatches)
	} else if h < httpWatches {
		t.Logf("the metric counted %.0f of %d HTTP watches as closed for slowness", h, httpWatches)
	}
	if w == 0 {
		t.Errorf("the metric counted none of %d stalled WebSocket watches as closed", wsWatches)
	}
	if (peak-base)>>10 > boundMiB {
		t.Errorf("peak RSS %d MiB above the %d MiB held before, want at most %d MiB", (peak-base)>>10, base>>10, boundMiB)
	}

	// What the clients see: their streams end once they read what the
	// kernel held (the server closed the connections). That is up to the
	// socket buffers' worth of events per stream, hundreds of MiB in all
	// through TLS: a minute allows for a loaded machine, and reading
	// stops once every stream has ended.
	var ended atomic.Int32
	var read atomic.Int64
	readStart := time.Now()
	readCtx, readCancel := context.WithTimeout(ctx, time.Minute)
	defer readCancel()
	next.Store(0)
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < httpWatches && readCtx.Err() == nil; i = int(next.Add(1)) - 1 {
				stop := context.AfterFunc(readCtx, func() { bodies[i].Close() })
				n, _ := io.Copy(io.Discard, bodies[i])
				read.Add(n)
				if stop() {
					ended.Add(1)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d of %d HTTP watch streams ended on the client's side, %d MiB read in %v",
		ended.Load(), httpWatches, read.Load()>>20, time.Since(readStart).Round(time.Millisecond))
	if int(ended.Load()) != httpWatches {
		t.Errorf("%d of %d stalled HTTP watch streams ended, want all", ended.Load(), httpWatches)
	}

	wsEnded := 0
	for _, c := range wsConns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var err error
		for err == nil {
			_, _, err = c.ReadMessage()
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			wsEnded++
		}
	}
	t.Logf("%d of %d WebSocket watches ended on the client's side", wsEnded, wsWatches)
	if wsEnded != wsWatches {
		t.Errorf("%d of %d stalled WebSocket watches ended, want all", wsEnded, wsWatches)
	}

	// The server serves on: a list of everything written, and a new watch.
	t0 := time.Now()
	code, body, err := s.Do(http.MethodGet, blobs, s.Token, nil)
	if err != nil || code != http.StatusOK || strings.Count(string(body), `"kind":"Blob"`) != written+preWrites {
		t.Fatalf("LIST after the stalled watches: %d %v, %d objects, want %d", code, err, strings.Count(string(body), `"kind":"Blob"`), written+preWrites)
	}
	t.Logf("LIST of %d objects after the stalled watches: %v", written+preWrites, time.Since(t0).Round(time.Millisecond))
}
