package serving

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// limitedToken authenticates (limitedUser) as a user outside
// system:masters, whose requests the in-flight limits apply to; the admin
// token's are exempt from them.
const limitedToken = "limited-token"

var limitedUser = authenticator.TokenFunc(func(_ context.Context, tok string) (*authenticator.Response, bool, error) {
	if tok != limitedToken {
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: "limited", Groups: []string{user.AllAuthenticated}}}, true, nil
})

// allowAll allows every request, so that limitedUser's reach the API.
var allowAll = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
})

// TestLimitInflight fills each class of in-flight slots with requests that
// block and checks that, with queuing off, one more of that class gets 429
// with Retry-After at once, while the other classes and the probes are
// still served; and that a slot is free again once its request ends.
func TestLimitInflight(t *testing.T) {
	release := make(chan struct{})
	srv, entered := blockingServer(t, release, LimitOptions{
		MaxRequestsInflight: 2, MaxMutatingRequestsInflight: 1, MaxWatches: 1, MaxQueuedRequestsPerUser: -1,
	})

	const (
		list  = "/apis/example.setpoint.dev/v1/widgets"
		watch = "/apis/example.setpoint.dev/v1/widgets?watch=true"
	)
	var wg sync.WaitGroup
	start := func(method, path string) {
		wg.Go(func() {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			if code, body := do(t, method, srv.URL+path+sep+"block=1", limitedToken, nil); code != http.StatusOK {
				t.Errorf("%s %s: %d %s", method, path, code, body)
			}
		})
		<-entered
	}
	start("GET", list)
	start("GET", list)
	start("POST", list)
	start("GET", watch)

	for _, c := range []struct{ method, path string }{{"GET", list}, {"POST", list}, {"GET", watch}} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+limitedToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var st metav1.Status
		_ = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || st.Reason != metav1.StatusReasonTooManyRequests {
			t.Errorf("%s %s at the limit: %d Retry-After=%q reason %q; want 429, Retry-After 1, TooManyRequests",
				c.method, c.path, resp.StatusCode, resp.Header.Get("Retry-After"), st.Reason)
		}
	}
	if code, _ := do(t, "GET", srv.URL+"/readyz", "", nil); code != http.StatusOK {
		t.Errorf("/readyz with every slot taken: %d, want 200 (probes are not limited)", code)
	}
	if code, _ := do(t, "GET", srv.URL+list, "wrong", nil); code != http.StatusUnauthorized {
		t.Errorf("unauthenticated request at the limit: %d, want 401 (it takes no slot)", code)
	}
	close(release)
	wg.Wait()
	if code, body := do(t, "GET", srv.URL+list, limitedToken, nil); code != http.StatusOK {
		t.Errorf("GET after the slots were freed: %d %s", code, body)
	}
	_, metrics := do(t, "GET", srv.URL+"/metrics", testToken, nil)
	for _, want := range []string{
		`setpoint_apiserver_dropped_requests_total{request_kind="readOnly"} 1`,
		`setpoint_apiserver_dropped_requests_total{request_kind="mutating"} 1`,
		`setpoint_apiserver_dropped_requests_total{request_kind="watch"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// blockingServer serves NewHandler with limits, closed with t, for the
// admin token and limitedToken (allowed everything) in front of an API
// whose requests with a block query parameter take their slot until
// release is closed: entered gets the method and path of each once it has
// its slot.
func blockingServer(t *testing.T, release <-chan struct{}, limits LimitOptions) (*httptest.Server, <-chan string) {
	t.Helper()
	entered := make(chan string, 16)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("block") != "" {
			entered <- r.Method + " " + r.URL.Path
			<-release
		}
		_, _ = w.Write([]byte("{}"))
	})
	h := NewHandler(HandlerOptions{API: api, Token: testToken, Authenticators: []authenticator.Token{limitedUser}, Authorizer: allowAll,
		Logger: quiet, Limits: limits})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, entered
}

// TestLimitRequestTimeout checks that a request other than a watch gets a
// context that ends after RequestTimeout, and a watch does not.
func TestLimitRequestTimeout(t *testing.T) {
	got := make(chan error, 1)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			got <- r.Context().Err()
		case <-time.After(2 * time.Second):
			got <- nil
		}
	})
	h := NewHandler(HandlerOptions{API: api, Token: testToken, Logger: quiet, Limits: LimitOptions{RequestTimeout: 100 * time.Millisecond}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	t0 := time.Now()
	do(t, "GET", srv.URL+"/apis/example.setpoint.dev/v1/widgets", testToken, nil)
	if err := <-got; !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > time.Second {
		t.Errorf("list: context ended with %v after %v; want DeadlineExceeded after about 100ms", err, time.Since(t0))
	}
	do(t, "GET", srv.URL+"/apis/example.setpoint.dev/v1/widgets?watch=true", testToken, nil)
	if err := <-got; err != nil {
		t.Errorf("watch: context ended with %v; a watch has no request timeout", err)
	}
}

// TestLimitLongerTimeout checks that a request LongerTimeout picks gets its
// longer deadline, and others keep RequestTimeout.
func TestLimitLongerTimeout(t *testing.T) {
	got := make(chan time.Duration, 1)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := r.Context().Deadline()
		got <- time.Until(d)
	})
	longer := func(r *http.Request) time.Duration {
		if r.Method == http.MethodPost {
			return time.Hour
		}
		return 0
	}
	h := NewHandler(HandlerOptions{API: api, Token: testToken, Logger: quiet,
		Limits: LimitOptions{RequestTimeout: time.Minute, LongerTimeout: longer}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	do(t, "POST", srv.URL+"/apis/example.setpoint.dev/v1/namespaces/default/widgets", testToken, nil)
	if d := <-got; d < 59*time.Minute {
		t.Errorf("POST: deadline in %v, want the longer hour", d)
	}
	do(t, "GET", srv.URL+"/apis/example.setpoint.dev/v1/widgets", testToken, nil)
	if d := <-got; d > time.Minute {
		t.Errorf("GET: deadline in %v, want the request timeout of a minute", d)
	}
}

// TestConnectionLimits holds the most connections a server allows, all
// unauthenticated, and checks that an authenticated client still gets in
// (the oldest unauthenticated connections are closed to make room), that
// its connection, once authenticated, survives further floods, and that a
// new connection is refused only when everything in its way has
// authenticated.
func TestConnectionLimits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const total = 8
	cl := LimitConnections(ln, ConnOptions{MaxConnections: total, MaxConnectionsPerAddress: total, Logger: quiet})
	srv := &http.Server{
		Handler:           NewHandler(HandlerOptions{API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) }), Token: testToken, Logger: quiet}),
		ConnContext:       ConnContext,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(cl) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/api/v1/namespaces"

	// flood opens n raw connections that send nothing.
	var raws []net.Conn
	defer func() {
		for _, c := range raws {
			c.Close()
		}
	}()
	flood := func(n int) {
		for range n {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			raws = append(raws, c)
		}
		testsupport.Poll(t, 10*time.Second, fmt.Sprintf("the listener to hold %d connections", total), func() (bool, string) {
			n := cl.Open()
			return n == total, fmt.Sprint(n, " open")
		})
	}
	flood(3 * total)

	// An authenticated client with a keep-alive connection of its own.
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	get := func() (int, error) {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(); err != nil || code != 200 {
		t.Fatalf("authenticated GET with the server full of idle unauthenticated connections: %d %v", code, err)
	}
	// More floods: the authenticated connection is never the one closed.
	flood(3 * total)
	for i := range 5 {
		if code, err := get(); err != nil || code != 200 {
			t.Fatalf("authenticated GET %d after more floods: %d %v", i, code, err)
		}
	}
	if got := cl.Open(); got > total {
		t.Errorf("%d connections open, want at most %d", got, total)
	}

	// Fill the server with authenticated connections: a new one is refused.
	var clients []*http.Transport
	defer func() {
		for _, tr := range clients {
			tr.CloseIdleConnections()
		}
	}()
	for range total - 1 {
		tr := &http.Transport{}
		clients = append(clients, tr)
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("a connection past the limit, with every other one authenticated, was served (read %d, %v)", n, err)
	}
}

// TestConnectionLimitPerAddress checks that one address cannot hold more
// than its share.
func TestConnectionLimitPerAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := LimitConnections(ln, ConnOptions{MaxConnections: 100, MaxConnectionsPerAddress: 3, Logger: quiet})
	defer cl.Close()
	go func() {
		for {
			c, err := cl.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	for range 10 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	testsupport.Poll(t, 10*time.Second, "3 connections from 127.0.0.1", func() (bool, string) {
		n := cl.Open()
		return n == 3, fmt.Sprint(n, " open")
	})
	time.Sleep(50 * time.Millisecond)
	if got := cl.Open(); got != 3 {
		t.Errorf("%d connections open from one address, want 3", got)
	}
}

// TestTLSDefaults checks that the default TLS settings refuse a client that
// offers only a CBC suite, and TLS 1.1, and serve one that offers an AEAD
// suite; and that the flags' values are checked.
func TestTLSDefaults(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{}
	if err := (TLSOptions{}).Apply(srv.TLS); err != nil {
		t.Fatal(err)
	}
	srv.StartTLS()
	defer srv.Close()
	dial := func(cfg *tls.Config) error {
		cfg.InsecureSkipVerify = true
		c, err := tls.Dial("tcp", srv.Listener.Addr().String(), cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"CBC SHA-1 suite only", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}}, false},
		{"CBC SHA-256 suite only", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256}}, false},
		{"TLS 1.1", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, false},
		{"TLS 1.2 AES-GCM", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}, true},
		{"TLS 1.3", &tls.Config{MinVersion: tls.VersionTLS13}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := dial(tc.cfg); (err == nil) != tc.ok {
				t.Errorf("handshake: %v; want success %v", err, tc.ok)
			}
		})
	}

	for _, bad := range []TLSOptions{{MinVersion: "TLS1.2"}, {CipherSuites: []string{"TLS_NO_SUCH_SUITE"}}} {
		if err := bad.Apply(&tls.Config{}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	cfg := &tls.Config{}
	if err := (TLSOptions{MinVersion: "VersionTLS13", CipherSuites: []string{"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}}).Apply(cfg); err != nil ||
		cfg.MinVersion != tls.VersionTLS13 || len(cfg.CipherSuites) != 1 || cfg.CipherSuites[0] != tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 {
		t.Errorf("Apply(TLS 1.3, one suite): %v %+v", err, cfg)
	}
}

// TestMetricsLabelOnlyServedResources sends more requests for made-up
// resources than the resource label has values, without a token and with
// one, and checks that a served resource still gets its own label.
func TestMetricsLabelOnlyServedResources(t *testing.T) {
	srv, _ := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/widgets") {
			MarkServed(r.Context())
			_, _ = w.Write([]byte("{}"))
			return
		}
		http.NotFound(w, r)
	}))
	for i := range maxResourceLabels + 20 {
		token := ""
		if i%2 == 0 {
			token = testToken
		}
		do(t, "GET", fmt.Sprintf("%s/apis/made.up/v1/thing%d", srv.URL, i), token, nil)
	}
	do(t, "GET", srv.URL+"/apis/example.setpoint.dev/v1/widgets", testToken, nil)
	_, body := do(t, "GET", srv.URL+"/metrics", testToken, nil)
	for _, want := range []string{
		`setpoint_apiserver_requests_total{code="200",resource="widgets",subresource="",verb="list"} 1`,
		`setpoint_apiserver_requests_total{code="404",resource="unknown",subresource="",verb="list"} 266`,
		`setpoint_apiserver_requests_total{code="401",resource="unknown",subresource="",verb="list"} 266`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `resource="thing`) || strings.Contains(body, `resource="other"`) {
		t.Errorf("/metrics labels made-up resources:\n%s", body)
	}
}

// TestMetricsServedCallback checks that HandlerOptions.Served labels the
// requests for served resources, unauthenticated ones included, and
// nothing else.
func TestMetricsServedCallback(t *testing.T) {
	h := NewHandler(HandlerOptions{
		API:    http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) }),
		Token:  testToken,
		Logger: quiet,
		Served: func(info *request.RequestInfo) bool { return info.Resource == "namespaces" },
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	do(t, "GET", srv.URL+"/api/v1/namespaces", "", nil)
	do(t, "GET", srv.URL+"/api/v1/namespaces", testToken, nil)
	do(t, "GET", srv.URL+"/api/v1/madeup", "", nil)
	_, body := do(t, "GET", srv.URL+"/metrics", testToken, nil)
	for _, want := range []string{
		`setpoint_apiserver_requests_total{code="401",resource="namespaces",subresource="",verb="list"} 1`,
		`setpoint_apiserver_requests_total{code="200",resource="namespaces",subresource="",verb="list"} 1`,
		`setpoint_apiserver_requests_total{code="401",resource="unknown",subresource="",verb="list"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestLimitExemptsMasters fills every in-flight seat with another user's
// requests and checks that a request of the group system:masters is still
// served at once, read, write and watch alike (kube-apiserver's exempt
// priority level), while the other user, and the admin impersonating a
// user outside system:masters, still get 429.
func TestLimitExemptsMasters(t *testing.T) {
	release := make(chan struct{})
	srv, entered := blockingServer(t, release, LimitOptions{
		MaxRequestsInflight: 1, MaxMutatingRequestsInflight: 1, MaxWatches: 1, MaxQueuedRequestsPerUser: -1, FairShareSeats: 1,
	})

	const (
		list  = "/apis/example.setpoint.dev/v1/widgets"
		watch = "/apis/example.setpoint.dev/v1/widgets?watch=true"
	)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	for _, c := range []struct{ method, path string }{{"GET", list + "?block=1"}, {"POST", list + "?block=1"}, {"GET", watch + "&block=1"}} {
		wg.Go(func() {
			if code, body := do(t, c.method, srv.URL+c.path, limitedToken, nil); code != http.StatusOK {
				t.Errorf("limited %s %s: %d %s", c.method, c.path, code, body)
			}
		})
		<-entered
	}
	asAlice := http.Header{"Impersonate-User": {"alice"}}
	for _, c := range []struct {
		method, path, token string
		header              http.Header
		want                int
	}{
		{"GET", list, testToken, nil, http.StatusOK},
		{"POST", list, testToken, nil, http.StatusOK},
		{"GET", watch, testToken, nil, http.StatusOK},
		{"GET", list, limitedToken, nil, http.StatusTooManyRequests},
		{"POST", list, limitedToken, nil, http.StatusTooManyRequests},
		{"GET", watch, limitedToken, nil, http.StatusTooManyRequests},
		{"GET", list, testToken, asAlice, http.StatusTooManyRequests},
	} {
		if code, body := do(t, c.method, srv.URL+c.path, c.token, c.header); code != c.want {
			who := "admin"
			if c.token == limitedToken {
				who = "limited"
			}
			t.Errorf("%s %s %s %v with every seat taken: %d %s, want %d", who, c.method, c.path, c.header, code, body, c.want)
		}
	}
}
