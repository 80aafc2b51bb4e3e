package test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/storetest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// watchNames opens a watch of namespaces and sends "TYPE name" for each
// event it reads; the channel is closed when the watch ends.
func watchNames(t *testing.T, ctx context.Context, s *testserver.Server) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/namespaces?watch=1", nil)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	c := s.HTTPClient()
	c.Timeout = 0
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	names := make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(names)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				Type   string
				Object struct{ Metadata struct{ Name string } }
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				names <- ev.Type + " " + ev.Object.Metadata.Name
			}
		}
	}()
	return names
}

// waitFor reads names until want arrives or d passes.
func waitFor(names <-chan string, want string, d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case n, ok := <-names:
			if !ok {
				return false
			}
			if n == want {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// TestSlowDiskStallsOnlyWrites freezes the filesystem under a running
// server's data directory (fsfreeze, as a disk that stops completing
// writes): a write then waits for the disk until --request-timeout, when
// it gets 504 Timeout saying it may still be committed, while gets, lists, /readyz, a new watch and an open one keep
// answering within a second; once the disk is back the write is committed
// (a retry gets 201, or 409 when the queued write got there first) and the
// open watch delivers it. The server collects garbage often meanwhile.
func TestSlowDiskStallsOnlyWrites(t *testing.T) {
	if _, err := exec.LookPath("fsfreeze"); err != nil {
		t.Skip("fsfreeze (util-linux) is not installed: cannot stall the disk")
	}
	mnt := storetest.MountSmallDisk(t, 64<<20)
	const requestTimeout = 3 * time.Second
	s := testserver.Start(t, testserver.Options{
		DataDir: filepath.Join(mnt, "data"),
		Args:    []string{"--store-free-space-reserve", "16Mi", "--request-timeout", requestTimeout.String()},
		// A collection every few hundred kilobytes allocated, so that
		// collections run while the disk is frozen: a writer waiting on
		// the disk where the runtime cannot stop it (a page fault in one
		// of Badger's maps) would then stop the whole server.
		Env: []string{"GOGC=1"},
	})
	createNamespaces(t, s, "before", 20)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := watchNames(t, ctx, s)
	if !waitFor(open, "ADDED before-00019", 10*time.Second) {
		t.Fatal("the watch did not list the namespaces made before the freeze")
	}
	// The rest of its initial list (the namespaces the server made).
	for quiet := false; !quiet; {
		select {
		case <-open:
		case <-time.After(500 * time.Millisecond):
			quiet = true
		}
	}

	// Frozen from here; thawed in every case, before the server stops
	// and the disk is unmounted (cleanups run last first).
	if out, err := exec.Command("sync").CombinedOutput(); err != nil {
		t.Fatalf("sync: %v %s", err, out)
	}
	thaw := storetest.FreezeDisk(t, mnt)
	frozenAt := time.Now()

	type result struct {
		code int
		body string
		err  error
		took time.Duration
	}
	create := func(name string) result {
		t0 := time.Now()
		code, body, err := s.Do(http.MethodPost, "/api/v1/namespaces", s.Token,
			strings.NewReader(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+name+`"}}`))
		return result{code, string(body), err, time.Since(t0)}
	}
	written := make(chan result, 1)
	go func() { written <- create("frozen") }()

	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-written:
		t.Fatalf("a write on a frozen disk answered at once: %d %s %v", r.code, r.body, r.err)
	default:
	}

	// Reads while the write waits for the disk.
	const bound = time.Second
	timed := func(what string, f func() error) {
		t.Helper()
		t0 := time.Now()
		err := f()
		d := time.Since(t0)
		t.Logf("%s on a frozen disk: %v", what, d.Round(time.Millisecond))
		if err != nil {
			t.Fatalf("%s on a frozen disk: %v", what, err)
		}
		if d > bound {
			t.Errorf("%s on a frozen disk took %v, want under %v", what, d, bound)
		}
	}
	expect := func(path string, want string) func() error {
		return func() error {
			code, body, err := s.Do(http.MethodGet, path, s.Token, nil)
			if err != nil {
				return err
			}
			if code != http.StatusOK || !strings.Contains(string(body), want) {
				return &httpErr{code, string(body)}
			}
			return nil
		}
	}
	for range 3 {
		timed("GET namespace", expect("/api/v1/namespaces/before-00007", `"name":"before-00007"`))
		timed("LIST namespaces", expect("/api/v1/namespaces", `"name":"before-00019"`))
		timed("GET /readyz", expect("/readyz", "ok"))
	}
	timed("a new watch's initial list", func() error {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		if !waitFor(watchNames(t, wctx, s), "ADDED before-00019", bound) {
			return errString("no initial events")
		}
		return nil
	})
	select {
	case n, ok := <-open:
		if !ok {
			t.Fatal("the open watch ended while the disk was frozen")
		}
		t.Fatalf("the open watch sent %q before anything was written", n)
	default:
	}

	// The stalled write ends at --request-timeout with 504 Timeout, whose
	// message says the write may still be committed: its outcome is
	// unknown to the client, as with any timed-out request, and the store
	// keeps a queued write and commits it once the disk is back.
	var r result
	select {
	case r = <-written:
	case <-time.After(requestTimeout + 10*time.Second):
		t.Fatalf("a write on a frozen disk did not end within %v of --request-timeout %v", requestTimeout+10*time.Second, requestTimeout)
	}
	t.Logf("write on a frozen disk ended after %v: code %d %.200s (err %v)", r.took.Round(time.Millisecond), r.code, r.body, r.err)
	if r.err != nil || r.code != http.StatusGatewayTimeout || !strings.Contains(r.body, `"reason":"Timeout"`) ||
		!strings.Contains(r.body, "may still be committed") {
		t.Fatalf("write on a frozen disk: %d %s (err %v); want 504 Timeout saying the write may still be committed", r.code, r.body, r.err)
	}
	if r.took > requestTimeout+time.Second {
		t.Errorf("the 504 came %v after the write, want by --request-timeout %v and a moment", r.took, requestTimeout)
	}
	if r.took < requestTimeout-500*time.Millisecond {
		t.Fatalf("write ended after %v, before --request-timeout %v", r.took, requestTimeout)
	}
	timed("GET namespace after the write timed out", expect("/api/v1/namespaces/before-00003", `"name":"before-00003"`))

	// Thawed: the write (retried, as a client does after 504) is stored,
	// and the open watch delivers it.
	thaw()
	t.Logf("disk frozen for %v", time.Since(frozenAt).Round(time.Millisecond))
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		r = create("frozen")
		if r.code == http.StatusCreated || r.code == http.StatusConflict {
			// 409 AlreadyExists: the timed-out write was committed.
			t.Logf("retry after the thaw: %d %.120s", r.code, r.body)
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("write after the thaw: %d %s %v", r.code, r.body, r.err)
		}
	}
	if !waitFor(open, "ADDED frozen", 10*time.Second) {
		t.Fatal("the open watch did not deliver the write made once the disk was back")
	}
	if code, body, err := s.Do(http.MethodGet, "/api/v1/namespaces/frozen", s.Token, nil); err != nil || code != http.StatusOK {
		t.Fatalf("GET after the thaw: %d %s %v", code, body, err)
	}
}

type httpErr struct {
	code int
	body string
}

func (e *httpErr) Error() string {
	if len(e.body) > 300 {
		return http.StatusText(e.code) + ": " + e.body[:300]
	}
	return http.StatusText(e.code) + ": " + e.body
}

type errString string

func (e errString) Error() string { return string(e) }
