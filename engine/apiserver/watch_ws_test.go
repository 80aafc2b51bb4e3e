package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/store/badger"
)

const (
	tableAccept   = "application/json;as=Table;g=meta.k8s.io;v=v1"
	partialAccept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
)

// wsEvent is one decoded watch event, its object left generic.
type wsEvent struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}

// jsonString reads a string at path in m.
func jsonString(m map[string]any, path ...string) string {
	for _, k := range path[:len(path)-1] {
		m, _ = m[k].(map[string]any)
	}
	s, _ := m[path[len(path)-1]].(string)
	return s
}

// dialWatch opens a WebSocket watch at path (query included) with header
// and returns its events.
func dialWatch(t *testing.T, ts *httptest.Server, path string, header http.Header) <-chan wsEvent {
	t.Helper()
	u := "ws" + strings.TrimPrefix(ts.URL, "http") + path
	c, _, err := websocket.DefaultDialer.Dial(u, header)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	out := make(chan wsEvent, 256)
	go func() {
		defer close(out)
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			var ev wsEvent
			if err := json.Unmarshal(msg, &ev); err != nil {
				t.Errorf("%s: event %s: %v", path, msg, err)
				return
			}
			out <- ev
		}
	}()
	return out
}

// httpWatch opens a watch over the HTTP stream and returns its events.
func httpWatch(t *testing.T, ts *httptest.Server, path, accept string) <-chan wsEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+path, nil)
	req.Header.Set("Accept", accept)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %d", path, resp.StatusCode)
	}
	out := make(chan wsEvent, 256)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev wsEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				out <- ev
			}
		}
	}()
	return out
}

// eventName is the name of the object an event is about: the object's, or
// for a Table, its row object's.
func eventName(ev wsEvent) string {
	if ev.Object["kind"] == "Table" {
		rows, _ := ev.Object["rows"].([]any)
		if len(rows) != 1 {
			return ""
		}
		row, _ := rows[0].(map[string]any)
		obj, _ := row["object"].(map[string]any)
		return jsonString(obj, "metadata", "name")
	}
	return jsonString(ev.Object, "metadata", "name")
}

// collect reads events until the watch has shown "DELETED b" and, after
// it, a BOOKMARK.
func collect(t *testing.T, name string, ch <-chan wsEvent) []wsEvent {
	t.Helper()
	var evs []wsEvent
	deleted := false
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("%s: watch ended after %d events", name, len(evs))
			}
			evs = append(evs, ev)
			if ev.Type == "DELETED" && eventName(ev) == "b" {
				deleted = true
			}
			if deleted && ev.Type == "BOOKMARK" {
				return evs
			}
		case <-deadline:
			t.Fatalf("%s: no DELETED b then BOOKMARK in 10s; got %d events", name, len(evs))
		}
	}
}

// sequence is "TYPE name" for each event other than a bookmark.
func sequence(evs []wsEvent) string {
	var s []string
	for _, ev := range evs {
		if ev.Type != "BOOKMARK" {
			s = append(s, ev.Type+" "+eventName(ev))
		}
	}
	return strings.Join(s, ", ")
}

// checkTable checks that every event of a Table watch is a Table of one
// row with the Widget's printer columns, column definitions in the first
// event only, and the row object as includeObject asked (rowKind).
func checkTable(t *testing.T, name string, evs []wsEvent, rowKind string) {
	t.Helper()
	for i, ev := range evs {
		o := ev.Object
		if o["kind"] != "Table" || o["apiVersion"] != "meta.k8s.io/v1" {
			t.Errorf("%s: event %d (%s) object is a %v %v, want a meta.k8s.io/v1 Table", name, i, ev.Type, o["apiVersion"], o["kind"])
			return
		}
		cols, _ := o["columnDefinitions"].([]any)
		var names []string
		for _, c := range cols {
			names = append(names, jsonString(c.(map[string]any), "name"))
		}
		switch got := strings.Join(names, ","); {
		case i == 0 && got != "Name,Display,Size,State,Provisioned,Age":
			t.Errorf("%s: first event's columns = %q", name, got)
		case i > 0 && got != "":
			t.Errorf("%s: event %d repeats the column definitions: %q", name, i, got)
		}
		rows, _ := o["rows"].([]any)
		if len(rows) != 1 {
			t.Errorf("%s: event %d has %d rows, want 1", name, i, len(rows))
			return
		}
		row := rows[0].(map[string]any)
		cells, _ := row["cells"].([]any)
		if len(cells) != 6 {
			t.Errorf("%s: event %d has cells %v", name, i, cells)
			return
		}
		obj, _ := row["object"].(map[string]any)
		rv := jsonString(o, "metadata", "resourceVersion")
		if rv == "" || jsonString(obj, "metadata", "resourceVersion") != rv {
			t.Errorf("%s: event %d: Table resourceVersion %q, row object's %q", name, i, rv, jsonString(obj, "metadata", "resourceVersion"))
		}
		if ev.Type == "BOOKMARK" {
			continue
		}
		if cells[0] != eventName(ev) || cells[2] != "small" {
			t.Errorf("%s: event %d cells = %v", name, i, cells)
		}
		if obj["kind"] != rowKind {
			t.Errorf("%s: event %d row object is a %v, want a %s", name, i, obj["kind"], rowKind)
		}
		if _, hasSpec := obj["spec"]; hasSpec != (rowKind == "Widget") {
			t.Errorf("%s: event %d row object spec present=%v", name, i, hasSpec)
		}
	}
}

// TestWebSocketWatchConversions: a WebSocket watch converts its objects as
// the HTTP stream does when the Accept header (or, for a browser, the
// accept query parameter) asks for Tables or PartialObjectMetadata, while
// plain watchers of the same kind, at the same time and sharing the
// encoded events, still get full objects.
func TestWebSocketWatchConversions(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	eng, err := engine.New(context.Background(), engine.Options{Store: db, BookmarkInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Options{Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	defer hs.Close()
	defer hs.CloseClientConnections()
	ts := &testServer{Server: hs, api: api, eng: eng, db: db}
	ts.registerWidget(t)
	ts.mustDo(t, http.StatusCreated, request{method: "POST", path: widgetsPath, body: widgetJSON("a", "small", nil)})

	// From resourceVersion 0: the initial ADDED a, then what follows.
	const q = "?watch=true&resourceVersion=0&allowWatchBookmarks=true"
	accept := func(v string) http.Header { return http.Header{"Accept": {v}} }
	watches := []struct {
		name string
		ch   <-chan wsEvent
	}{
		{"plain", dialWatch(t, hs, widgetsPath+q, nil)},
		{"table", dialWatch(t, hs, widgetsPath+q, accept(tableAccept))},
		{"partial", dialWatch(t, hs, widgetsPath+q, accept(partialAccept))},
		{"plain json", dialWatch(t, hs, widgetsPath+q, accept("application/json"))},
		{"partial 2", dialWatch(t, hs, widgetsPath+q, accept(partialAccept+", application/json"))},
		{"table by query", dialWatch(t, hs, widgetsPath+q+"&includeObject=Object&accept="+url.QueryEscape(tableAccept), nil)},
		{"table over http", httpWatch(t, hs, widgetsPath+q, tableAccept)},
	}
	ts.mustDo(t, http.StatusCreated, request{method: "POST", path: widgetsPath, body: widgetJSON("b", "small", nil)})
	ts.mustDo(t, http.StatusOK, request{method: "PATCH", path: widgetsPath + "/b", contentType: "application/merge-patch+json", body: `{"metadata":{"labels":{"x":"1"}}}`})
	ts.mustDo(t, http.StatusOK, request{method: "DELETE", path: widgetsPath + "/b"})

	const want = "ADDED a, ADDED b, MODIFIED b, DELETED b"
	for _, w := range watches {
		evs := collect(t, w.name, w.ch)
		if got := sequence(evs); got != want {
			t.Errorf("%s: events %s, want %s", w.name, got, want)
		}
		switch w.name {
		case "plain", "plain json":
			for i, ev := range evs {
				if ev.Object["kind"] != "Widget" || (ev.Type != "BOOKMARK" && jsonString(ev.Object, "spec", "size") != "small") {
					t.Errorf("%s: event %d (%s) is not the full Widget: %v", w.name, i, ev.Type, ev.Object)
					break
				}
			}
		case "partial", "partial 2":
			for i, ev := range evs {
				o := ev.Object
				if o["kind"] != "PartialObjectMetadata" || o["apiVersion"] != "meta.k8s.io/v1" || jsonString(o, "metadata", "resourceVersion") == "" {
					t.Errorf("%s: event %d (%s) is not a PartialObjectMetadata: %.200v", w.name, i, ev.Type, o)
					break
				}
				if _, ok := o["spec"]; ok {
					t.Errorf("%s: event %d has the spec: %.200v", w.name, i, o)
					break
				}
			}
		case "table", "table over http":
			checkTable(t, w.name, evs, "PartialObjectMetadata")
		case "table by query":
			checkTable(t, w.name, evs, "Widget")
		}
	}
}

// TestWebSocketWatchBadTableOptions: a Table watch with an includeObject
// Kubernetes does not know fails as one ERROR event over WebSocket (a browser cannot
// read a failed handshake's status) and 400 over HTTP.
func TestWebSocketWatchBadTableOptions(t *testing.T) {
	ts := newTestServer(t)
	ts.registerWidget(t)
	path := widgetsPath + "?watch=true&includeObject=Everything"
	ch := dialWatch(t, ts.Server, path, http.Header{"Accept": {tableAccept}})
	select {
	case ev, ok := <-ch:
		if !ok || ev.Type != "ERROR" || ev.Object["code"] != float64(http.StatusBadRequest) {
			t.Fatalf("first event %+v (open %v), want an ERROR with code 400", ev, ok)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event in 5s")
	}
	if code, b, _ := ts.do(t, request{path: path, accept: tableAccept}); code != http.StatusBadRequest {
		t.Fatalf("HTTP watch = %d %s, want 400", code, b)
	}
}
