package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// blobCRD is a kind with one free-form string, data, for objects of a
// chosen size.
var blobCRD = testsupport.CRD{Group: "test.setpoint.dev", Kind: "Blob", Schema: `{"properties":{"data":{"type":"string"}},"type":"object"}`}.String()

// procKiB reads a "Name:   N kB" line of /proc/PID/status.
func procKiB(t *testing.T, pid int, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, name)
	return 0
}

// resetPeak makes VmHWM start again from the current RSS.
func resetPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS of the server: %v", err)
	}
}

// TestAbusiveClientsKeepMemoryBounded runs, scaled down, the three loads
// that took the server's memory into gigabytes: many watches of a kind of
// large objects, more watches than the server allows, and concurrent full
// lists of a large kind. For each it prints the server's peak RSS (VmHWM)
// above what it held before, and fails past a bound; it also checks that
// an unrelated list stays fast under the first load and that watches past
// --max-watches get 429 with Retry-After.
func TestAbusiveClientsKeepMemoryBounded(t *testing.T) {
	const maxWatches = 150
	s := testserver.Start(t, testserver.Options{Args: []string{"--max-watches", strconv.Itoa(maxWatches)}})
	pid := s.Pid()
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: s.CAPool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
	}}
	defer client.CloseIdleConnections()
	// doAs makes a request as the admin, with h's headers (impersonation).
	doAs := func(ctx context.Context, h http.Header, method, path, body string) (*http.Response, error) {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, s.URL+path, r)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header[k] = v
		}
		return client.Do(req)
	}
	do := func(ctx context.Context, method, path, body string) (*http.Response, error) {
		return doAs(ctx, nil, method, path, body)
	}
	mustDo := func(method, path, body string, want int) {
		t.Helper()
		resp, err := do(context.Background(), method, path, body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %.300s, want %d", method, path, resp.StatusCode, b, want)
		}
	}
	setup := time.Now()
	mustDo("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", blobCRD, http.StatusCreated)
	testsupport.Eventually(t, 30*time.Second, "blobs served", func() bool {
		resp, err := do(context.Background(), "GET", "/apis/test.setpoint.dev/v1/namespaces/default/blobs", "")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	mustDo("POST", "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"big"}}`, http.StatusCreated)
	mustDo("POST", "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"many"}}`, http.StatusCreated)
	blob := func(name string, size int) string {
		return fmt.Sprintf(`{"apiVersion":"test.setpoint.dev/v1","kind":"Blob","metadata":{"name":%q},"data":%q}`, name, strings.Repeat("x", size))
	}
	// Five objects of 1 MiB (the attack used 3 MB).
	for i := range 5 {
		mustDo("POST", "/apis/test.setpoint.dev/v1/namespaces/big/blobs", blob(fmt.Sprintf("b%d", i), 1<<20), http.StatusCreated)
	}
	// 2,000 objects of 4 KiB (the attack listed 69,000 small ones).
	const small = 2000
	var wg sync.WaitGroup
	var failed atomic.Int32
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < small; i += 8 {
				resp, err := do(context.Background(), "POST", "/apis/test.setpoint.dev/v1/namespaces/many/blobs", blob(fmt.Sprintf("s%d", i), 4<<10))
				if err != nil || resp.StatusCode != http.StatusCreated {
					failed.Add(1)
				}
				if resp != nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d creates failed", n, small)
	}

	t.Logf("setup (a CRD, 5 objects of 1 MiB, %d of 4 KiB) took %v", small, time.Since(setup).Round(time.Millisecond))
	const boundMiB = 400
	check := func(load string, run func()) {
		t.Helper()
		base := procKiB(t, pid, "VmRSS")
		resetPeak(t, pid)
		start := time.Now()
		run()
		peak := procKiB(t, pid, "VmHWM")
		t.Logf("%s: server RSS %d MiB before, peak %d MiB (+%d MiB, bound +%d MiB), %v",
			load, base>>10, peak>>10, (peak-base)>>10, boundMiB, time.Since(start).Round(time.Millisecond))
		if (peak-base)>>10 > boundMiB {
			t.Errorf("%s: peak RSS %d MiB above the %d MiB held before, want at most %d MiB", load, (peak-base)>>10, base>>10, boundMiB)
		}
	}

	// The watches come from a user outside system:masters, whose
	// requests the limits apply to.
	limited := limitedHeader(t, s)
	// watch opens a watch with its initial list and reads until it has
	// got want ADDED events; it returns the response's code.
	watch := func(ctx context.Context, path string, want int, opened chan<- int) {
		if !strings.Contains(path, "?") {
			path += "?"
		}
		resp, err := doAs(ctx, limited, "GET", path+"watch=true", "")
		if err != nil {
			opened <- 0
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
			opened <- resp.StatusCode
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for got := 0; got < want && sc.Scan(); {
			if bytes.HasPrefix(sc.Bytes(), []byte(`{"type":"ADDED"`)) {
				got++
			}
		}
		opened <- http.StatusOK
		<-ctx.Done() // the watch stays open until the load ends
	}
	openWatches := func(n int, path string, want int) map[int]int {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		opened := make(chan int, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { watch(ctx, path, want, opened) })
		}
		codes := map[int]int{}
		for range n {
			codes[<-opened]++
		}
		// While they are all open, an unrelated list.
		t0 := time.Now()
		mustDo("GET", "/api/v1/namespaces", "", http.StatusOK)
		t.Logf("unrelated LIST with %d watches open: %v", codes[http.StatusOK], time.Since(t0).Round(time.Millisecond))
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("unrelated LIST took %v under the watch load", d)
		}
		cancel()
		wg.Wait()
		return codes
	}

	check("100 watches of five 1 MiB objects", func() {
		codes := openWatches(100, "/apis/test.setpoint.dev/v1/namespaces/big/blobs", 5)
		if codes[http.StatusOK] != 100 {
			t.Errorf("100 watches: %v, want all 200", codes)
		}
	})
	check(fmt.Sprintf("%d watches of a kind of 2,000 objects against --max-watches %d", maxWatches+50, maxWatches), func() {
		// Each selects one object, so that the load is the watches
		// themselves and their shared initial list, not the transfer.
		codes := openWatches(maxWatches+50, "/apis/test.setpoint.dev/v1/namespaces/many/blobs?fieldSelector=metadata.name%3Ds7&", 1)
		t.Logf("%d watches with --max-watches %d: %v", maxWatches+50, maxWatches, codes)
		if codes[http.StatusOK] > maxWatches || codes[http.StatusTooManyRequests] == 0 {
			t.Errorf("%d watches with --max-watches %d: %v, want at most %d served and the rest 429", maxWatches+50, maxWatches, codes, maxWatches)
		}
	})
	check("30 concurrent full lists of 2,000 objects of 4 KiB", func() {
		var wg sync.WaitGroup
		var bad atomic.Int32
		for range 30 {
			wg.Go(func() {
				resp, err := do(context.Background(), "GET", "/apis/test.setpoint.dev/v1/namespaces/many/blobs", "")
				if err != nil {
					bad.Add(1)
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != http.StatusOK || bytes.Count(b, []byte(`"kind":"Blob"`)) != small {
					bad.Add(1)
				}
			})
		}
		wg.Wait()
		if n := bad.Load(); n > 0 {
			t.Errorf("%d of 30 full lists failed or were short", n)
		}
	})
}

// TestUnauthenticatedConnectionsCannotLockOut holds, without a token, more
// TLS connections than the server allows and checks that kubectl still
// gets in, that the server never holds more than its cap, and that a
// client offering only a CBC cipher suite is refused.
func TestUnauthenticatedConnectionsCannotLockOut(t *testing.T) {
	const maxConns = 40
	s := testserver.Start(t, testserver.Options{Args: []string{"--max-connections", strconv.Itoa(maxConns)}})
	pid := s.Pid()
	fds := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	base := fds()
	var conns []*tls.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Handshaken, idle, unauthenticated: three times the cap.
	for range 3 * maxConns {
		c, err := tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: s.CAPool, MinVersion: tls.VersionTLS12})
		if err != nil {
			continue // refused or closed to make room: expected past the cap
		}
		conns = append(conns, c)
	}
	time.Sleep(200 * time.Millisecond)
	held := fds() - base
	t.Logf("%d idle unauthenticated TLS connections attempted, cap %d: the server holds %d more file descriptors than before", 3*maxConns, maxConns, held)
	if held > maxConns+5 {
		t.Errorf("the server holds %d more file descriptors with %d idle connections attempted, want at most about %d", held, 3*maxConns, maxConns)
	}
	t0 := time.Now()
	if out, errOut, err := s.Kubectl("get", "namespaces", "--request-timeout=20s"); err != nil || !strings.Contains(out, "default") {
		t.Fatalf("kubectl with the server full of unauthenticated connections: %v\n%s%s", err, out, errOut)
	}
	t.Logf("kubectl get namespaces past the flood: %v", time.Since(t0).Round(time.Millisecond))

	// TLS: a client offering only a CBC suite is refused; one offering an
	// AEAD suite is served.
	if c, err := tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: s.CAPool, MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}}); err == nil {
		c.Close()
		t.Errorf("a TLS 1.2 client offering only CBC suites completed the handshake")
	}
	c, err := tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: s.CAPool, MaxVersion: tls.VersionTLS12})
	if err != nil {
		t.Errorf("a TLS 1.2 client with Go's default suites: %v", err)
	} else {
		c.Close()
	}
}
