package host_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// callStatus is the status an egress guest reports (host/testdata/guests/egress/calls).
type callStatus struct {
	Status      int    `json:"status"`
	Body        string `json:"body"`
	ContentType string `json:"contentType"`
	Error       string `json:"error"`
	Reason      string `json:"reason"`
	Forbidden   bool   `json:"forbidden"`
}

// egressCall reconciles once with config and returns the guest's report.
func egressCall(t *testing.T, p *host.Plugin, config map[string]string) callStatus {
	t.Helper()
	resp, err := p.Reconcile(context.Background(), &abi.ReconcileRequest{Config: config, Object: abi.RawJSON(`{"apiVersion":"v1","kind":"Widget","metadata":{"name":"w"}}`)})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	var st callStatus
	if err := json.Unmarshal(resp.Status, &st); err != nil {
		t.Fatalf("status %s: %v", resp.Status, err)
	}
	return st
}

// echoServer answers /echo with the method, body and X-Token header it
// got, /big with 2048 bytes, /slow after the request's context ends or release closes,
// /redirect?to=URL with a 302 to URL, and /status/N with status N.
type echoServer struct {
	mu             sync.Mutex
	requests       []string // "METHOD path"
	inflight, peak int
	slow           int // /slow requests received
	release        chan struct{}
}

func (s *echoServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.inflight++
	s.peak = max(s.peak, s.inflight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	switch {
	case r.URL.Path == "/echo":
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, r.Method+" "+string(b)+" "+r.Header.Get("X-Token"))
	case r.URL.Path == "/big":
		w.Write(make([]byte, 2048))
	case r.URL.Path == "/slow":
		s.mu.Lock()
		s.slow++
		s.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-s.release:
		}
	case r.URL.Path == "/redirect":
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	case strings.HasPrefix(r.URL.Path, "/status/"):
		var code int
		json.Unmarshal([]byte(strings.TrimPrefix(r.URL.Path, "/status/")), &code)
		w.WriteHeader(code)
	default:
		http.NotFound(w, r)
	}
}

// egressCallCtx is egressCall under ctx.
func egressCallCtx(ctx context.Context, t *testing.T, p *host.Plugin, config map[string]string) callStatus {
	t.Helper()
	resp, err := p.Reconcile(ctx, &abi.ReconcileRequest{Config: config, Object: abi.RawJSON(`{"apiVersion":"v1","kind":"Widget","metadata":{"name":"w"}}`)})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	var st callStatus
	if err := json.Unmarshal(resp.Status, &st); err != nil {
		t.Fatalf("status %s: %v", resp.Status, err)
	}
	return st
}

// observer records what the host tells its EgressObserver.
type observer struct {
	mu  sync.Mutex
	got []string // "plugin grant status"
}

func (o *observer) ObserveEgress(plugin, grant, status string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, plugin+" "+grant+" "+status)
}

func (o *observer) calls() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

// TestEgressCall is a native-ABI guest calling a loopback server through the
// http host function: a granted call gets the response whatever its status,
// a call the grant does not cover fails with an error that names it, and
// each call is observed and logged without its headers or body.
func TestEgressCall(t *testing.T) {
	srv := &echoServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	base := ts.URL // http://127.0.0.1:port
	var logs lockedBuffer
	obs := &observer{}
	h := hosttest.NewHost(t, host.Options{Egress: obs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	grant := &host.Egress{Allow: []host.EgressRule{mustRule(t, base, "GET", "PUT")}}
	p := hosttest.LoadWith(t, h, "egress", host.Config{Egress: grant, Limits: host.Limits{CallTimeout: 5 * time.Second}})

	st := egressCall(t, p, map[string]string{"url": base + "/echo?token=q1", "method": "PUT", "body": "secret-body", "header": "X-Token: secret-header"})
	if st.Status != 200 || st.Body != "PUT secret-body secret-header" || st.ContentType != "text/plain" {
		t.Errorf("PUT /echo = %+v", st)
	}
	st = egressCall(t, p, map[string]string{"url": base + "/status/503"})
	if st.Status != 503 || st.Error != "" {
		t.Errorf("GET /status/503 = %+v, want a 503 response and no error", st)
	}
	st = egressCall(t, p, map[string]string{"url": base + "/echo", "method": "DELETE"})
	want := "egress to " + base + " (DELETE) is not granted: add it to spec.egress.allow of Plugin egress"
	if !st.Forbidden || st.Reason != abi.HTTPForbidden || !strings.Contains(st.Error, want) {
		t.Errorf("DELETE /echo = %+v, want a forbidden error containing %q", st, want)
	}
	st = egressCall(t, p, map[string]string{"url": base + "/echo", "header": "Host: other.example.com"})
	if st.Reason != abi.HTTPBadRequest || !strings.Contains(st.Error, "Host header") {
		t.Errorf("GET with a Host header = %+v, want a bad request", st)
	}

	if diff := cmp.Diff([]string{"egress " + base + " 200", "egress " + base + " 503", "egress  forbidden", "egress " + base + " badrequest"}, obs.calls()); diff != "" {
		t.Errorf("observed calls (-want +got):\n%s", diff)
	}
	out := logs.String()
	host := strings.TrimPrefix(base, "http://")
	for _, want := range [][]string{{"message=\"egress PUT ", "attrs.method=PUT", "attrs.host=" + host, "attrs.status=200", "attrs.durationMs="},
		{"message=\"egress DELETE ", "attrs.method=DELETE", "attrs.host=" + host, "attrs.status=forbidden"}} {
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
			return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(line, w) })
		}) {
			t.Errorf("plugin log has no line with %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{"secret-body", "secret-header", "q1"} {
		if strings.Contains(out, secret) {
			t.Errorf("plugin log shows %q:\n%s", secret, out)
		}
	}
}

// TestEgressGrants checks each grant and denial through a native guest and
// loopback servers: host pattern, scheme, port, no grant at all, a named
// loopback host, redirects on and off the list, the size cap, the timeout,
// the CA bundle and admission's read-only calls.
func TestEgressGrants(t *testing.T) {
	srv := &echoServer{release: make(chan struct{})}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	other := httptest.NewServer(srv) // never granted
	defer other.Close()
	tlsSrv := httptest.NewTLSServer(srv)
	defer tlsSrv.Close()
	base, port := ts.URL, ts.URL[strings.LastIndex(ts.URL, ":")+1:]
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	h := hosttest.NewHost(t, host.Options{})
	load := func(t *testing.T, g *host.Egress) *host.Plugin {
		return hosttest.LoadWith(t, h, "egress", host.Config{Egress: g, Limits: host.Limits{CallTimeout: 5 * time.Second, PoolSize: 2}})
	}
	grant := func(rules ...host.EgressRule) *host.Egress { return &host.Egress{Allow: rules} }
	tests := []struct {
		name   string
		grant  *host.Egress
		config map[string]string
		status int
		reason string
		errHas string
	}{
		{name: "no grant", grant: nil, config: map[string]string{"url": base + "/echo"},
			reason: abi.HTTPForbidden, errHas: "egress to " + base + " (GET) is not granted: add it to spec.egress.allow of Plugin egress"},
		{name: "literal loopback granted", grant: grant(mustRule(t, base, "GET")), config: map[string]string{"url": base + "/echo"}, status: 200},
		{name: "named localhost reaches loopback", grant: grant(mustRule(t, "http://localhost:"+port, "GET")),
			config: map[string]string{"url": "http://localhost:" + port + "/echo"}, status: 200},
		{name: "other scheme", grant: grant(mustRule(t, "https://127.0.0.1:"+port, "GET")), config: map[string]string{"url": base + "/echo"},
			reason: abi.HTTPForbidden, errHas: "(GET) is not granted"},
		{name: "other port", grant: grant(mustRule(t, "http://127.0.0.1:1", "GET")), config: map[string]string{"url": base + "/echo"},
			reason: abi.HTTPForbidden, errHas: "is not granted"},
		{name: "wildcard matches a subdomain", grant: grant(mustRule(t, "http://*.example.invalid", "GET")),
			config: map[string]string{"url": "http://a.b.example.invalid/"}, reason: abi.HTTPUnavailable, errHas: "no such host"},
		{name: "wildcard does not match the domain", grant: grant(mustRule(t, "http://*.example.invalid", "GET")),
			config: map[string]string{"url": "http://example.invalid/"}, reason: abi.HTTPForbidden, errHas: "egress to http://example.invalid:80 (GET) is not granted"},
		{name: "redirect to a granted URL", grant: grant(mustRule(t, base, "GET")),
			config: map[string]string{"url": base + "/redirect?to=" + url.QueryEscape(base+"/echo")}, status: 200},
		{name: "redirect off the list", grant: grant(mustRule(t, base, "GET")),
			config: map[string]string{"url": base + "/redirect?to=" + url.QueryEscape(other.URL+"/echo")},
			reason: abi.HTTPForbidden, errHas: "egress to " + other.URL + " (GET) is not granted"},
		{name: "connection refused", grant: grant(mustRule(t, "http://127.0.0.1:"+closedPort(t), "GET")),
			config: map[string]string{"url": "http://127.0.0.1:" + closedPort(t) + "/"}, reason: abi.HTTPUnavailable, errHas: "connection refused"},
		{name: "size cap", grant: &host.Egress{Allow: []host.EgressRule{mustRule(t, base, "GET")}, MaxResponseBytes: 1024},
			config: map[string]string{"url": base + "/big"}, reason: abi.HTTPTooLarge, errHas: "larger than spec.egress.maxResponseBytes (1024)"},
		{name: "under the size cap", grant: &host.Egress{Allow: []host.EgressRule{mustRule(t, base, "GET")}, MaxResponseBytes: 2048},
			config: map[string]string{"url": base + "/big"}, status: 200},
		{name: "timeout", grant: &host.Egress{Allow: []host.EgressRule{mustRule(t, base, "GET")}, Timeout: 50 * time.Millisecond},
			config: map[string]string{"url": base + "/slow"}, reason: abi.HTTPTimeout, errHas: "timed out"},
		{name: "TLS without the CA", grant: grant(mustRule(t, tlsSrv.URL, "GET")), config: map[string]string{"url": tlsSrv.URL + "/echo"},
			reason: abi.HTTPTLS, errHas: "certificate"},
		{name: "TLS with the CA bundle", grant: &host.Egress{Allow: []host.EgressRule{mustRule(t, tlsSrv.URL, "GET")}, CABundle: caPEM},
			config: map[string]string{"url": tlsSrv.URL + "/echo"}, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := egressCall(t, load(t, tt.grant), tt.config)
			if tt.reason == "" {
				if st.Status != tt.status || st.Error != "" {
					t.Errorf("call = %+v, want status %d", st, tt.status)
				}
				return
			}
			if st.Reason != tt.reason || !strings.Contains(st.Error, tt.errHas) || st.Forbidden != (tt.reason == abi.HTTPForbidden) {
				t.Errorf("call = %+v, want reason %s and an error containing %q", st, tt.reason, tt.errHas)
			}
		})
	}

	t.Run("admission may only read", func(t *testing.T) {
		p := load(t, grant(mustRule(t, base, "GET", "POST")))
		for method, want := range map[string]string{"GET": `"status":200`, "POST": "during admission: an admit call may only GET or HEAD"} {
			resp, err := p.Admit(context.Background(), &abi.AdmissionRequest{Operation: abi.Create, Config: map[string]string{"url": base + "/echo", "method": method},
				Object: abi.RawJSON(`{"apiVersion":"v1","kind":"Widget","metadata":{"name":"w"}}`)})
			if err != nil || !strings.Contains(resp.Message, want) {
				t.Errorf("admit %s = %+v, %v; want a message containing %q", method, resp, err, want)
			}
		}
	})

	t.Run("concurrency", func(t *testing.T) {
		p := load(t, &host.Egress{Allow: []host.EgressRule{mustRule(t, base, "GET")}, Concurrency: 1})
		srv.mu.Lock()
		before := srv.slow
		srv.mu.Unlock()
		done := make(chan string)
		go func() {
			resp, err := p.Reconcile(context.Background(), &abi.ReconcileRequest{Config: map[string]string{"url": base + "/slow"}, Object: abi.RawJSON(`{}`)})
			if err != nil {
				done <- err.Error()
				return
			}
			done <- string(resp.Status)
		}()
		waitFor(t, func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.slow == before+1 })
		// The call gets 90% of the 2 s, the guest the rest to report it.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st := egressCallCtx(ctx, t, p, map[string]string{"url": base + "/echo"})
		cancel()
		if st.Reason != abi.HTTPTimeout || !strings.Contains(st.Error, "1 calls were in flight (spec.egress.concurrency)") {
			t.Errorf("second call = %+v, want a timeout waiting for the one slot", st)
		}
		close(srv.release)
		if st := <-done; !strings.Contains(st, `"status":200`) {
			t.Errorf("first call = %s", st)
		}
	})

	t.Run("rate", func(t *testing.T) {
		p := load(t, &host.Egress{Allow: []host.EgressRule{mustRule(t, base, "GET")}, RatePerSecond: 0.5, Burst: 1})
		if st := egressCall(t, p, map[string]string{"url": base + "/echo"}); st.Status != 200 {
			t.Errorf("first call = %+v", st)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st := egressCallCtx(ctx, t, p, map[string]string{"url": base + "/echo"})
		if st.Reason != abi.HTTPTimeout || !strings.Contains(st.Error, "rate limit (spec.egress.ratePerSecond 0.5)") {
			t.Errorf("second call = %+v, want refused by the rate limit", st)
		}
	})
}

// closedPort is a loopback port nothing listens on (it was free a moment
// ago), the same one on every call of a test.
func closedPort(t *testing.T) string {
	closedOnce.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		l.Close()
	})
	return closed
}

var (
	closedOnce sync.Once
	closed     string
)

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustRule(t *testing.T, pattern string, methods ...string) host.EgressRule {
	t.Helper()
	r, err := host.ParseEgressURL(pattern)
	if err != nil {
		t.Fatal(err)
	}
	r.Methods = methods
	return r
}

// TestEgressExtism: an Extism-ABI guest reaches the outside world through
// Extism's own http_request (what Extism kits' HTTP helpers call), served
// under the plugin's grant like the http host function, and through the
// SDK's http host function. A call the grant refuses traps, as in Extism,
// with a message that names the grant.
func TestEgressExtism(t *testing.T) {
	srv := &echoServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	other := httptest.NewServer(srv)
	defer other.Close()
	base := ts.URL
	obs := &observer{}
	h := hosttest.NewHost(t, host.Options{Egress: obs, CompileTimeout: 10 * time.Minute})
	grant := &host.Egress{Allow: []host.EgressRule{mustRule(t, base, "GET", "POST")}, MaxResponseBytes: 1024}
	p := hosttest.LoadWith(t, h, "extismegress", host.Config{Egress: grant, Limits: host.Limits{CallTimeout: 5 * time.Second, PoolSize: 1}})

	st := egressCall(t, p, map[string]string{"kit": "extism", "url": base + "/echo", "method": "post", "body": "from-kit"})
	if st.Status != 200 || st.Body != "POST from-kit " || st.ContentType != "text/plain" {
		t.Errorf("http_request POST /echo = %+v", st)
	}
	st = egressCall(t, p, map[string]string{"kit": "extism", "url": base + "/status/404"})
	if st.Status != 404 {
		t.Errorf("http_request GET /status/404 = %+v, want the 404 as a response", st)
	}
	st = egressCall(t, p, map[string]string{"url": base + "/echo", "method": "GET"})
	if st.Status != 200 || st.Body != "GET  " {
		t.Errorf("SDK http GET /echo = %+v", st)
	}

	refusals := []struct {
		name   string
		config map[string]string
		want   string
	}{
		{"method", map[string]string{"kit": "extism", "url": base + "/echo", "method": "DELETE"},
			"egress to " + base + " (DELETE) is not granted: add it to spec.egress.allow of Plugin extismegress"},
		{"redirect off the list", map[string]string{"kit": "extism", "url": base + "/redirect?to=" + url.QueryEscape(other.URL+"/echo")},
			"egress to " + other.URL + " (GET) is not granted"},
		{"size cap", map[string]string{"kit": "extism", "url": base + "/big"}, "larger than spec.egress.maxResponseBytes (1024)"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Reconcile(context.Background(), &abi.ReconcileRequest{Config: tt.config, Object: abi.RawJSON(`{}`)})
			if !errors.Is(err, host.ErrTrap) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("reconcile = %v, want a trap naming %q", err, tt.want)
			}
		})
	}
	want := []string{"extismegress " + base + " 200", "extismegress " + base + " 404", "extismegress " + base + " 200",
		"extismegress  forbidden", "extismegress " + base + " forbidden", "extismegress " + base + " toolarge"}
	if diff := cmp.Diff(want, obs.calls()); diff != "" {
		t.Errorf("observed calls (-want +got):\n%s", diff)
	}
}
