package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/engine/plugins"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// testToken is the admin token of newTestServerHandler's handler.
const testToken = "test-admin-token"

// newTestServerHandler wires the server's object layer on a real Badger
// store as runServer does, runs its loops until the test ends, and serves
// it over plain HTTP behind the same serving layers as `setpoint server`.
func newTestServerHandler(t *testing.T) *httptest.Server {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	metrics := serving.NewMetrics()
	ctx, cancel := context.WithCancel(context.Background())
	api, err := newPluginAPI(ctx, pluginAPIOptions{store: db, log: log, dataDir: t.TempDir(), registerer: metrics.Registry()})
	if err != nil {
		cancel()
		db.Close()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := api.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	watches := &watchStopper{}
	watches.ctx, watches.stop = context.WithCancel(context.Background())
	hs := httptest.NewServer((&serverOptions{}).handler(api, testToken, nil, log, metrics, watches))
	t.Cleanup(func() {
		watches.stop()
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		wg.Wait()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	// The plugin manager registers the Plugin kind once it runs.
	testsupport.Poll(t, 10*time.Second, "GET "+plugins.PluginsPath+" to answer 200 once the plugin manager runs", func() (bool, string) {
		req, _ := http.NewRequest("GET", hs.URL+plugins.PluginsPath, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return hs
}

// TestModuleUploadPassesServingLayers: a module upload goes through the
// serving layers every request goes through, and through the API server's
// router: without the token the common authentication refuses it with 401,
// with it the upload handler answers, and both count in the API's request
// metric under the modules resource.
func TestModuleUploadPassesServingLayers(t *testing.T) {
	hs := newTestServerHandler(t)
	do := func(method, path, token, contentType, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	for _, tc := range []struct {
		name, method, path, token, contentType string
		code                                   int
		body                                   string
	}{
		{name: "upload without a token", method: "POST", path: plugins.ModulesPath, contentType: "application/wasm", code: http.StatusUnauthorized},
		{name: "upload with a wrong token", method: "POST", path: plugins.ModulesPath, token: "nope", contentType: "application/wasm", code: http.StatusUnauthorized},
		{name: "module read without a token", method: "GET", path: plugins.ModulesPath + "/sha256:" + strings.Repeat("0", 64), code: http.StatusUnauthorized},
		{name: "upload of no module", method: "POST", path: plugins.ModulesPath, token: testToken, contentType: "application/wasm", code: http.StatusBadRequest, body: "no module bytes"},
		{name: "upload of another type", method: "POST", path: plugins.ModulesPath, token: testToken, contentType: "text/plain", code: http.StatusUnsupportedMediaType},
		{name: "module list", method: "GET", path: plugins.ModulesPath, token: testToken, code: http.StatusOK, body: `"kind":"ModuleList"`},
		{name: "missing module", method: "GET", path: plugins.ModulesPath + "/sha256:" + strings.Repeat("0", 64), token: testToken, code: http.StatusNotFound},
		{name: "log of a missing Plugin", method: "GET", path: plugins.PluginsPath + "/none/log", token: testToken, code: http.StatusNotFound},
		{name: "Plugin list beside the routes", method: "GET", path: plugins.PluginsPath, token: testToken, code: http.StatusOK, body: `"kind":"PluginList"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(tc.method, tc.path, tc.token, tc.contentType, "")
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("%s %s = %d %s, want %d with %q", tc.method, tc.path, code, body, tc.code, tc.body)
			}
		})
	}

	_, metrics := do("GET", "/metrics", testToken, "", "")
	for _, want := range []string{
		`setpoint_apiserver_requests_total{code="401",resource="modules",subresource="",verb="get"} 1`,
		`setpoint_apiserver_requests_total{code="401",resource="modules",subresource="",verb="create"} 2`,
		`setpoint_apiserver_requests_total{code="400",resource="modules",subresource="",verb="create"} 1`,
		`setpoint_apiserver_requests_total{code="200",resource="modules",subresource="",verb="list"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s; it has:\n%s", want, grepLines(metrics, "setpoint_apiserver_requests_total"))
		}
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
