package host_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

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

// echoServer answers /echo with the method and body it got, /big with
// size bytes, /slow after the request's context ends or release closes,
// /redirect?to=URL with a 302 to URL, and /status/N with status N.
type echoServer struct {
	mu             sync.Mutex
	requests       []string // "METHOD path"
	inflight, peak int
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

// TestEgressCall is a native-ABI guest calling a loopback server through the
// http host function: a granted call gets the response whatever its status,
// and a call the grant does not cover fails with an error that names it.
func TestEgressCall(t *testing.T) {
	srv := &echoServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	base := ts.URL // http://127.0.0.1:port
	grant := &host.Egress{Allow: []host.EgressRule{mustRule(t, base, "GET", "PUT")}}
	p := hosttest.Load(t, "egress", host.Config{Egress: grant, Limits: host.Limits{CallTimeout: 5 * time.Second}})

	st := egressCall(t, p, map[string]string{"url": base + "/echo", "method": "PUT", "body": "hello", "header": "X-Token: t1"})
	if st.Status != 200 || st.Body != "PUT hello t1" || st.ContentType != "text/plain" {
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
