package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// TestHTTPWatchFanOut opens many chunked HTTP watches of one kind with
// different selectors and formats (objects, PartialObjectMetadata, Table),
// which share encoded events, and one watch whose client never reads,
// then updates the objects: every reading watch must get exactly the
// events its selector matches, in order, none missing, in its format,
// without waiting for the stalled one, which is still open.
func TestHTTPWatchFanOut(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	eng, api := newTestAPI(t, db, Options{WatchWriteTimeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	defer func() { cancel(); <-done }()
	stalledEnded := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r)
		if r.URL.Query().Get("stalled") != "" {
			close(stalledEnded)
		}
	}))
	defer hs.Close()
	defer hs.CloseClientConnections()
	ts := &testServer{Server: hs, api: api, eng: eng, db: db}
	ts.registerBlobs(t)

	const objects, updates = 6, 48
	for i := range objects {
		env := []string{"a", "b"}[i%2]
		ts.mustDo(t, http.StatusCreated, request{method: "POST", path: blobsPath, body: fmt.Sprintf(
			`{"apiVersion":"test.setpoint.dev/v1","kind":"Blob","metadata":{"name":"b%d","labels":{"env":%q}},"data":"0"}`, i, env)})
	}
	var list struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.Unmarshal(ts.mustDo(t, http.StatusOK, request{path: blobsPath}), &list); err != nil {
		t.Fatal(err)
	}
	rv := list.Metadata.ResourceVersion

	selectors := []struct {
		query string
		match func(i int) bool
	}{
		{"", func(int) bool { return true }},
		{"labelSelector=env%3Da", func(i int) bool { return i%2 == 0 }},
		{"labelSelector=env%21%3Da", func(i int) bool { return i%2 == 1 }},
		{"fieldSelector=metadata.name%3Db3", func(i int) bool { return i == 3 }},
	}
	formats := []struct{ name, accept string }{
		{"object", ""},
		{"partial", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"},
		{"table", "application/json;as=Table;g=meta.k8s.io;v=v1"},
	}
	type watcher struct {
		name   string
		sel    int
		format string
		got    []string
		err    error
	}
	var watchers []*watcher
	var wg sync.WaitGroup
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	for copyN := range 2 {
		for si, sel := range selectors {
			for _, f := range formats {
				if f.name == "object" && copyN > 0 {
					continue // the whole objects cost the most to read
				}
				w := &watcher{name: fmt.Sprintf("%s/%q/%d", f.name, sel.query, copyN), sel: si, format: f.name}
				watchers = append(watchers, w)
				req, _ := http.NewRequestWithContext(wctx, "GET", hs.URL+blobsPath+"?watch=true&resourceVersion="+rv+"&"+sel.query, nil)
				if f.accept != "" {
					req.Header.Set("Accept", f.accept)
				}
				resp, err := hs.Client().Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("watch %s: %v %v", w.name, err, resp)
				}
				wg.Go(func() {
					defer resp.Body.Close()
					w.got, w.err = readWatch(resp, f.name, matching(selectors[si].match, objects, updates))
				})
			}
		}
	}

	// The stalled client: a receive buffer of 4 KiB, and it never reads.
	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET %s?watch=true&resourceVersion=%s&stalled=1 HTTP/1.1\r\nHost: test\r\n\r\n", blobsPath, rv)

	// Updates of 32 KiB each: 1.5 MiB for each watch of whole objects.
	var want []string
	for u := range updates {
		i := u % objects
		body := fmt.Sprintf(`{"data":%q}`, strings.Repeat(string(rune('a'+u%26)), 32<<10))
		var obj struct {
			Metadata struct{ ResourceVersion string }
		}
		if err := json.Unmarshal(ts.mustDo(t, http.StatusOK, request{method: "PATCH", path: fmt.Sprintf("%s/b%d", blobsPath, i),
			contentType: "application/merge-patch+json", body: body}), &obj); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d MODIFIED b%d %s", i, i, obj.Metadata.ResourceVersion))
	}
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		wcancel()
		<-waited
		t.Fatal("the reading watches did not get all their events in 30s")
	}
	select {
	case <-stalledEnded:
		t.Fatal("the stalled watch ended before the others had their events; it was meant to be stalled")
	default:
	}
	for _, w := range watchers {
		var exp []string
		for _, line := range want {
			var i int
			fmt.Sscanf(line, "%d", &i)
			if selectors[w.sel].match(i) {
				exp = append(exp, line[strings.IndexByte(line, ' ')+1:])
			}
		}
		if w.err != nil {
			t.Errorf("watch %s: %v", w.name, w.err)
		}
		if diff := cmp.Diff(exp, w.got); diff != "" {
			t.Errorf("watch %s: events (-want +got):\n%s", w.name, diff)
		}
	}
}

// matching is how many of updates, round robin over objects, match.
func matching(match func(int) bool, objects, updates int) int {
	n := 0
	for u := range updates {
		if match(u % objects) {
			n++
		}
	}
	return n
}

// readWatch reads a watch's events as "TYPE name resourceVersion" until it
// has want of them, checking that each is in format.
func readWatch(resp *http.Response, format string, want int) ([]string, error) {
	var got []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	table := 0
	for sc.Scan() {
		var ev struct {
			Type   string
			Object struct {
				Kind     string
				Metadata struct{ Name, ResourceVersion string }
				Columns  []json.RawMessage `json:"columnDefinitions"`
				Rows     []struct {
					Object struct {
						Kind     string
						Metadata struct{ Name, ResourceVersion string }
					}
				}
				Data *string
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return got, fmt.Errorf("event %d: %v: %.200s", len(got), err, sc.Bytes())
		}
		md, kind := ev.Object.Metadata, ev.Object.Kind
		switch format {
		case "table":
			if kind != "Table" || len(ev.Object.Rows) != 1 {
				return got, fmt.Errorf("event %d: want a Table of one row: %.200s", len(got), sc.Bytes())
			}
			if (table == 0) != (len(ev.Object.Columns) > 0) {
				return got, fmt.Errorf("event %d: column definitions on the first event only: %.200s", len(got), sc.Bytes())
			}
			table++
			md = ev.Object.Rows[0].Object.Metadata
		case "partial":
			if kind != "PartialObjectMetadata" {
				return got, fmt.Errorf("event %d: want PartialObjectMetadata: %.200s", len(got), sc.Bytes())
			}
		default:
			if kind != "Blob" || ev.Object.Data == nil {
				return got, fmt.Errorf("event %d: want a whole Blob: %.200s", len(got), sc.Bytes())
			}
		}
		got = append(got, ev.Type+" "+md.Name+" "+md.ResourceVersion)
		if len(got) == want {
			return got, nil
		}
	}
	return got, fmt.Errorf("stream ended after %d events: %v", len(got), sc.Err())
}

// countingWriter is a ResponseWriter that counts what reaches it.
type countingWriter struct {
	header  http.Header
	lines   int
	flushes int
}

func (c *countingWriter) Header() http.Header { return c.header }
func (c *countingWriter) WriteHeader(int)     {}
func (c *countingWriter) Flush()              { c.flushes++ }
func (c *countingWriter) Write(b []byte) (int, error) {
	c.lines += strings.Count(string(b), "\n")
	return len(b), nil
}

// TestHTTPWatchBatches checks the flush policy of the HTTP watch stream:
// the events of a burst go out in one flush (the watch calls flush when it
// has no other event waiting), and a long burst is flushed every
// batchBytes; a flush with nothing written since the last one writes
// nothing.
func TestHTTPWatchBatches(t *testing.T) {
	small := []byte(`{"type":"MODIFIED","object":{}}`)
	large := []byte(`{"type":"MODIFIED","object":{"data":"` + strings.Repeat("x", batchBytes/4) + `"}}`)
	for _, tc := range []struct {
		name        string
		event       []byte
		burst       int
		wantFlushes int
	}{
		{name: "nothing written"},
		{name: "one event", event: small, burst: 1, wantFlushes: 1},
		{name: "a burst of small events", event: small, burst: 20, wantFlushes: 1},
		// The fourth event reaches batchBytes: a flush there, and one
		// for the last three.
		{name: "a burst of large events", event: large, burst: 7, wantFlushes: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cw := &countingWriter{header: http.Header{}}
			hs := &httpStream{w: cw, rc: http.NewResponseController(cw), flusher: true, writeTimeout: time.Second}
			ew := newEventWriter(context.Background(), nil, wswatch.Conversion{}, hs)
			for range tc.burst {
				if !ew.write(tc.event) {
					t.Fatal("write failed")
				}
			}
			if !ew.flush() || !ew.flush() {
				t.Fatal("flush failed")
			}
			hs.stop()
			if cw.flushes != tc.wantFlushes || cw.lines != tc.burst {
				t.Errorf("flushes %d, events written %d; want %d, %d", cw.flushes, cw.lines, tc.wantFlushes, tc.burst)
			}
		})
	}
}
