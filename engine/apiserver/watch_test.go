package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// watchLines opens a watch and returns its events as "TYPE name" strings.
func watchLines(t *testing.T, ts *httptest.Server, path string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+path, nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("watch %s: %d", path, resp.StatusCode)
	}
	out := make(chan string, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev struct {
				Type   string
				Object struct {
					Metadata struct{ Name, Namespace string }
				}
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				out <- ev.Type + " " + ev.Object.Metadata.Name
			}
		}
	}()
	t.Cleanup(cancel)
	return out
}

func expectLine(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got, ok := <-ch:
			if !ok {
				t.Fatalf("watch ended before %q", want)
			}
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q in 10s", want)
		}
	}
}

func TestWatchScopes(t *testing.T) {
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
	ts.mustDo(t, 201, request{method: "POST", path: "/api/v1/namespaces", body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other"}}`})

	all := watchLines(t, hs, "/apis/example.setpoint.dev/v1/widgets?watch=true&allowWatchBookmarks=true")
	nsWatch := watchLines(t, hs, "/api/v1/namespaces?watch=1&fieldSelector=metadata.name%3Dthird")
	expectLine(t, all, "BOOKMARK ")

	ts.mustDo(t, 201, request{method: "POST", path: widgetsPath, body: widgetJSON("a", "small", map[string]string{"x": "1"})})
	ts.mustDo(t, 201, request{method: "POST", path: "/apis/example.setpoint.dev/v1/namespaces/other/widgets", body: widgetJSON("b", "small", map[string]string{"x": "1"})})
	expectLine(t, all, "ADDED a")
	expectLine(t, all, "ADDED b")
	ts.mustDo(t, 201, request{method: "POST", path: "/api/v1/namespaces", body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"third"}}`})
	expectLine(t, nsWatch, "ADDED third")

	// deletecollection with a label selector, across one namespace.
	b := ts.mustDo(t, 200, request{method: "DELETE", path: widgetsPath + "?labelSelector=x%3D1"})
	if !strings.Contains(string(b), `"name":"a"`) || strings.Contains(string(b), `"name":"b"`) {
		t.Errorf("deletecollection returned %s", b)
	}
	expectLine(t, all, "DELETED a")

	// timeoutSeconds ends the stream.
	short := watchLines(t, hs, widgetsPath+"?watch=true&timeoutSeconds=1")
	deadline := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-short:
		case <-deadline:
			t.Fatal("watch with timeoutSeconds=1 still open after 10s")
		}
	}
}
