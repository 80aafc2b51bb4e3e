package serving

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// syncBuffer is a log sink the server's goroutines may write concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newTestServer serves api behind NewHandler over loopback HTTP.
func newTestServer(t *testing.T, api http.Handler) (*httptest.Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(NewHandler(HandlerOptions{API: api, Token: testToken, Logger: log}))
	t.Cleanup(srv.Close)
	return srv, logs
}

func do(t *testing.T, method, url, token string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetricsCountByVerbResourceAndCode(t *testing.T) {
	srv, _ := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		MarkServed(r.Context())
		if strings.HasSuffix(r.URL.Path, "/missing") {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("{}"))
	}))
	do(t, "GET", srv.URL+"/api/v1/namespaces", testToken, nil)
	do(t, "GET", srv.URL+"/api/v1/namespaces", testToken, nil)
	do(t, "GET", srv.URL+"/apis/example.setpoint.dev/v1/namespaces/default/widgets/missing", testToken, nil)
	do(t, "POST", srv.URL+"/apis/example.setpoint.dev/v1/namespaces/default/widgets", testToken, nil)
	do(t, "PUT", srv.URL+"/apis/example.setpoint.dev/v1/namespaces/default/widgets/a/status", testToken, nil)
	do(t, "GET", srv.URL+"/apis/example.setpoint.dev/v1/widgets?watch=true", testToken, nil)
	do(t, "GET", srv.URL+"/api/v1/namespaces", "wrong", nil)

	code, body := do(t, "GET", srv.URL+"/metrics", testToken, nil)
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, want := range []string{
		`setpoint_apiserver_requests_total{code="200",resource="namespaces",subresource="",verb="list"} 2`,
		`setpoint_apiserver_requests_total{code="404",resource="widgets",subresource="",verb="get"} 1`,
		`setpoint_apiserver_requests_total{code="200",resource="widgets",subresource="",verb="create"} 1`,
		`setpoint_apiserver_requests_total{code="200",resource="widgets",subresource="status",verb="update"} 1`,
		`setpoint_apiserver_requests_total{code="200",resource="widgets",subresource="",verb="watch"} 1`,
		// Unauthenticated: the API never says the resource is served.
		`setpoint_apiserver_requests_total{code="401",resource="unknown",subresource="",verb="list"} 1`,
		`setpoint_apiserver_request_duration_seconds_count{code="200",resource="namespaces",subresource="",verb="list"} 2`,
		`# TYPE setpoint_apiserver_request_duration_seconds histogram`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestMetricsResourceLabelIsBounded(t *testing.T) {
	m := NewMetrics()
	for i := range maxResourceLabels + 10 {
		m.resourceLabel(strings.Repeat("r", i+1))
	}
	if got := m.resourceLabel("brand-new"); got != "other" {
		t.Errorf("label past the cap %q, want other", got)
	}
	if got := m.resourceLabel("r"); got != "r" {
		t.Errorf("known label %q, want r", got)
	}
}

func TestPanicIsRecoveredInto500(t *testing.T) {
	srv, logs := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/boom" {
			panic("boom")
		}
		_, _ = w.Write([]byte("ok"))
	}))
	code, body := do(t, "GET", srv.URL+"/api/boom", testToken, nil)
	if code != 500 || !strings.Contains(body, `"reason":"InternalError"`) {
		t.Fatalf("panic answered %d %s", code, body)
	}
	if code, _ := do(t, "GET", srv.URL+"/api", testToken, nil); code != 200 {
		t.Fatalf("server broken after a panic: %d", code)
	}
	if !strings.Contains(logs.String(), `"msg":"handler panicked"`) {
		t.Errorf("panic not logged: %s", logs)
	}
}

func TestRequestLogNeverHoldsTheToken(t *testing.T) {
	var sawInfo *request.RequestInfo
	srv, logs := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawInfo, _ = request.RequestInfoFrom(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	do(t, "GET", srv.URL+"/api/v1/namespaces/default", testToken, nil)
	do(t, "GET", srv.URL+"/api/v1/namespaces?token="+testToken, "", wsHeader(wsProtocol(testToken)+", v4.channel.k8s.io"))
	do(t, "GET", srv.URL+"/api/v1/namespaces", testToken+"x", nil)
	out := logs.String()
	if strings.Contains(out, testToken) || strings.Contains(out, wsProtocol(testToken)) {
		t.Fatalf("log holds the token:\n%s", out)
	}
	for _, want := range []string{`"msg":"request"`, `"verb":"get"`, `"resource":"namespaces"`, `"name":"default"`, `"code":204`, `"user":"setpoint-admin"`, `"code":401`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if sawInfo == nil || sawInfo.Verb != "list" || sawInfo.Resource != "namespaces" {
		t.Errorf("request info in context %+v", sawInfo)
	}
}

func TestWrappedWriterKeepsFlusherAndHijacker(t *testing.T) {
	srv, logs := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/flush" {
			f, ok := w.(http.Flusher)
			if !ok {
				t.Error("writer lost http.Flusher")
				return
			}
			_, _ = w.Write([]byte("a"))
			f.Flush()
			return
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			t.Error("writer lost http.Hijacker")
			return
		}
		conn, rw, err := hj.Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
		_ = rw.Flush()
	}))
	if code, body := do(t, "GET", srv.URL+"/api/flush", testToken, nil); code != 200 || body != "a" {
		t.Fatalf("flush: %d %q", code, body)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/upgrade", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	// The log record is written after the handler returns, which can be
	// after the client has its 101; and srv.Close does not wait for a
	// handler whose connection was hijacked. So poll for it.
	logged := func() bool {
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"path":"/api/upgrade"`) && strings.Contains(sc.Text(), `"code":101`) {
				return true
			}
		}
		return false
	}
	testsupport.Poll(t, 10*time.Second, "the hijacked request logged with 101", func() (bool, string) {
		return logged(), "the log:\n" + logs.String()
	})
}

// TestHandlerHammer sends concurrent requests through every layer (run it
// with -race): each is counted exactly once.
func TestHandlerHammer(t *testing.T) {
	m := NewMetrics()
	h := NewHandler(HandlerOptions{
		API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			MarkServed(r.Context())
			_, _ = w.Write([]byte("{}"))
			w.(http.Flusher).Flush()
		}),
		Token:   testToken,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: m,
	})
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range each {
				req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces", nil)
				if i%2 == 0 {
					req.Header.Set("Authorization", "Bearer "+testToken)
				}
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
	wg.Wait()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	h.ServeHTTP(rec, req)
	for _, want := range []string{
		`setpoint_apiserver_requests_total{code="200",resource="namespaces",subresource="",verb="list"} 200`,
		`setpoint_apiserver_requests_total{code="401",resource="unknown",subresource="",verb="list"} 200`,
		`setpoint_apiserver_inflight_requests 1`, // the /metrics request itself
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestRequestLevel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verb     string
		code     int
		d        time.Duration
		hijacked bool
		want     slog.Level
	}{
		{name: "ok", verb: "get", code: 200, d: time.Millisecond, want: slog.LevelDebug},
		{name: "server error", verb: "create", code: 500, want: slog.LevelError},
		{name: "refused", verb: "create", code: 422, want: slog.LevelInfo},
		{name: "unauthorized", verb: "list", code: 401, want: slog.LevelInfo},
		{name: "polled absent object", verb: "get", code: 404, want: slog.LevelDebug},
		{name: "delete of absent object", verb: "delete", code: 404, want: slog.LevelInfo},
		{name: "slow", verb: "update", code: 200, d: 2 * time.Second, want: slog.LevelInfo},
		{name: "long watch", verb: "watch", code: 200, d: time.Minute, want: slog.LevelDebug},
		{name: "websocket", verb: "get", code: 101, d: time.Minute, hijacked: true, want: slog.LevelDebug},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := requestLevel(tc.verb, tc.code, tc.d, tc.hijacked); got != tc.want {
				t.Errorf("requestLevel(%s, %d, %v) = %v, want %v", tc.verb, tc.code, tc.d, got, tc.want)
			}
		})
	}
}

// TestMetricsSeriesKeptUpToTheBound checks that requests are counted the
// same whether their series is kept or past maxSeries, and that no more
// than maxSeries are kept.
func TestMetricsSeriesKeptUpToTheBound(t *testing.T) {
	m := NewMetrics()
	for i := range maxSeries + 10 {
		m.observe("get", "widgets", "", true, 1000+i, time.Millisecond)
	}
	m.observe("get", "widgets", "", true, 1000, time.Millisecond)             // kept
	m.observe("get", "widgets", "", true, 1000+maxSeries+9, time.Millisecond) // past the bound
	if n := m.seriesLen.Load(); n != maxSeries {
		t.Errorf("%d series kept, want %d", n, maxSeries)
	}
	for _, code := range []int{1000, 1000 + maxSeries + 9} {
		c := strconv.Itoa(code)
		if got := testutil.ToFloat64(m.requests.WithLabelValues("get", "widgets", "", c)); got != 2 {
			t.Errorf("code %s: count %v, want 2", c, got)
		}
	}
}

// TestMetricsLabelsBoundedAgainstClients checks that values a client
// chooses (the method of a request to a path outside the API, the
// subresource of a served resource) cannot add series to the request
// metrics without bound, or fill the kept series, and that every request
// is still counted.
func TestMetricsLabelsBoundedAgainstClients(t *testing.T) {
	m := NewMetrics()
	h := Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	}), InstrumentOptions{Metrics: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Served: func(info *request.RequestInfo) bool { return info.Resource == "widgets" }})
	const n = 300
	for i := range n {
		for _, r := range []*http.Request{
			httptest.NewRequest("M"+strconv.Itoa(i), "/made/up", nil),
			httptest.NewRequest("GET", "/apis/example.setpoint.dev/v1/namespaces/default/widgets/a/sub"+strconv.Itoa(i), nil),
			httptest.NewRequest("POST", "/apis/example.setpoint.dev/v1/namespaces/default/widgets/a/status", nil),
		} {
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	if got := testutil.CollectAndCount(m.requests); got > 10 {
		t.Errorf("%d request series after %d requests with made-up methods and subresources", got, 3*n)
	}
	if got := testutil.CollectAndCount(m.latency); got > 10 {
		t.Errorf("%d latency series after %d requests with made-up methods and subresources", got, 3*n)
	}
	if kept := m.seriesLen.Load(); kept > 10 {
		t.Errorf("%d series kept", kept)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("create", "widgets", "status", "404")); got != n {
		t.Errorf("status creates counted %v, want %d", got, n)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("other", "", "", "404")); got != n {
		t.Errorf("made-up methods counted %v, want %d", got, n)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("get", "widgets", "other", "404")); got != n {
		t.Errorf("made-up subresources counted %v, want %d", got, n)
	}
}

// TestProbeFailureLoggedAtInfo: a health endpoint's 500 (a server still
// starting answers /readyz so) is logged at info, the endpoint itself
// saying which check failed; any other 500 stays an error.
func TestProbeFailureLoggedAtInfo(t *testing.T) {
	srv, logs := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	for _, path := range []string{"/readyz", "/readyz/poststarthook/rbac/bootstrap-roles", "/healthz", "/livez/store", "/readyzz", "/api/v1/namespaces"} {
		if code, _ := do(t, http.MethodGet, srv.URL+path, testToken, nil); code != http.StatusInternalServerError {
			t.Fatalf("GET %s = %d", path, code)
		}
	}
	levels := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Level, Msg, Path string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Msg == "request" {
			levels[rec.Path] = rec.Level
		}
	}
	want := map[string]string{
		"/readyz": "INFO", "/readyz/poststarthook/rbac/bootstrap-roles": "INFO", "/healthz": "INFO", "/livez/store": "INFO",
		"/readyzz": "ERROR", "/api/v1/namespaces": "ERROR",
	}
	if !reflect.DeepEqual(levels, want) {
		t.Errorf("request log levels %v, want %v", levels, want)
	}
}
