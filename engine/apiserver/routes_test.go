package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/store/badger"
)

// TestRoutes: handlers given as Options.Routes are served on the router,
// behind its middleware (a panic is a 500 Status), and take precedence over
// the resource paths they overlap, which are served as before around them.
// New wants an engine and routes with patterns.
func TestRoutes(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "/apis/test.setpoint.dev/v1"
	eng, api := newTestAPI(t, db, Options{Routes: []Route{
		{Pattern: prefix + "/extra", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("extra " + r.Method))
		})},
		{Pattern: prefix + "/namespaces/{ns}/blobs/{name}/log", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("log"))
		})},
		{Pattern: prefix + "/boom", Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
		db.Close()
	})
	ts := &testServer{Server: hs, api: api, eng: eng, db: db}
	ts.registerBlobs(t)
	ts.mustDo(t, http.StatusCreated, request{method: "POST", path: blobsPath, body: blobJSON("b1", "data")})

	for _, tc := range []struct {
		name, method, path string
		code               int
		body               string
	}{
		{name: "route", method: "GET", path: prefix + "/extra", code: http.StatusOK, body: "extra GET"},
		{name: "route takes every method", method: "POST", path: prefix + "/extra", code: http.StatusOK, body: "extra POST"},
		{name: "route with parameters", method: "GET", path: blobsPath + "/b1/log", code: http.StatusOK, body: "log"},
		{name: "panic recovered", method: "GET", path: prefix + "/boom", code: http.StatusInternalServerError, body: `"reason":"InternalError"`},
		{name: "resource list beside the routes", method: "GET", path: prefix, code: http.StatusOK, body: `"name":"blobs"`},
		{name: "object beside the routes", method: "GET", path: blobsPath + "/b1", code: http.StatusOK, body: `"name":"b1"`},
		{name: "subresource beside the routes", method: "GET", path: blobsPath + "/b1/status", code: http.StatusNotFound},
		{name: "unknown path", method: "GET", path: prefix + "/extra/more", code: http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b, _ := ts.do(t, request{method: tc.method, path: tc.path})
			if code != tc.code || !strings.Contains(string(b), tc.body) {
				t.Fatalf("%s %s = %d %s, want %d with %q", tc.method, tc.path, code, b, tc.code, tc.body)
			}
		})
	}

	if _, err := New(Options{}); err == nil {
		t.Error("New took no engine")
	}
	if _, err := New(Options{Engine: eng, Routes: []Route{{Pattern: "modules", Handler: http.NotFoundHandler()}}}); err == nil {
		t.Error("New took a route pattern without a leading slash")
	}
}
