package apiserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/setpoint-dev/setpoint/store/badger"
)

// TestHealthEndpoints checks /healthz, /readyz and /livez as kube-apiserver
// serves them: "ok", one line per check with ?verbose, each check on its own
// path, and 500 naming the check that fails once the store is gone.
func TestHealthEndpoints(t *testing.T) {
	ts := newTestServer(t)
	for _, ep := range []string{"healthz", "readyz", "livez"} {
		if b := ts.mustDo(t, http.StatusOK, request{path: "/" + ep}); string(b) != "ok" {
			t.Errorf("/%s = %q, want ok", ep, b)
		}
		want := "[+]ping ok\n[+]store ok\n" + ep + " check passed\n"
		if b := ts.mustDo(t, http.StatusOK, request{path: "/" + ep + "?verbose"}); string(b) != want {
			t.Errorf("/%s?verbose = %q, want %q", ep, b, want)
		}
		for _, c := range []string{"ping", "store"} {
			if b := ts.mustDo(t, http.StatusOK, request{path: "/" + ep + "/" + c}); string(b) != "ok" {
				t.Errorf("/%s/%s = %q, want ok", ep, c, b)
			}
		}
		ts.mustDo(t, http.StatusNotFound, request{path: "/" + ep + "/nothing"})
	}
	if err := ts.db.Close(); err != nil {
		t.Fatal(err)
	}
	want := "[+]ping ok\n[-]store failed: reason withheld\nreadyz check failed\n"
	if b := ts.mustDo(t, http.StatusInternalServerError, request{path: "/readyz"}); string(b) != want {
		t.Errorf("/readyz with the store closed = %q, want %q", b, want)
	}
	ts.mustDo(t, http.StatusOK, request{path: "/livez/ping"})
}

// TestHealthEndpointsMatchLibrary serves the same checks through
// k8s.io/apiserver's healthz handlers, which kube-apiserver serves, and
// compares code, body and content type on every endpoint, with the store
// up and closed. One answer differs on purpose and stays out: a single
// failing check (/readyz/store) shows its error there, and Setpoint's
// health endpoints, which need no token, withhold it. (A single check's
// answer also carries X-Content-Type-Options here, which the library sets
// only on the checks together; that header is compared only there.)
func TestHealthEndpointsMatchLibrary(t *testing.T) {
	ts := newTestServer(t)
	mux := http.NewServeMux()
	store := healthz.NamedCheck("store", func(r *http.Request) error { return ts.eng.CheckStore(r.Context()) })
	for _, ep := range []string{"healthz", "readyz", "livez"} {
		healthz.InstallPathHandler(mux, "/"+ep, healthz.PingHealthz, store)
	}
	lib := httptest.NewServer(mux)
	defer lib.Close()
	get := func(t *testing.T, base, path string) (int, string, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ct := resp.Header.Get("Content-Type")
		if strings.Count(path, "/") == 1 { // the checks together
			ct += ", " + resp.Header.Get("X-Content-Type-Options")
		}
		return resp.StatusCode, string(b), ct
	}
	compared := 0
	for _, storeUp := range []bool{true, false} {
		if !storeUp {
			if err := ts.db.Close(); err != nil {
				t.Fatal(err)
			}
		}
		for _, ep := range []string{"healthz", "readyz", "livez"} {
			for _, path := range []string{"", "?verbose", "?verbose=1", "/ping", "/ping?verbose", "/store", "/store?verbose"} {
				if !storeUp && (path == "/store" || path == "/store?verbose") {
					continue
				}
				p := "/" + ep + path
				code, body, ct := get(t, ts.URL, p)
				wcode, wbody, wct := get(t, lib.URL, p)
				if code != wcode || body != wbody || ct != wct {
					t.Errorf("store up %v: GET %s = %d %q (%s), k8s.io/apiserver %d %q (%s)", storeUp, p, code, body, ct, wcode, wbody, wct)
				}
				compared++
			}
		}
	}
	if compared < 30 {
		t.Fatalf("%d answers compared", compared)
	}
}

// TestReadyChecks checks Options.ReadyChecks as kube-apiserver serves its
// post-start hooks: /readyz and /healthz fail naming the check until it
// passes, the check is served on its own path, and /livez leaves it out so
// that a liveness probe does not restart a server still starting.
func TestReadyChecks(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var done atomic.Bool
	_, api := newTestAPI(t, db, Options{ReadyChecks: []HealthCheck{{Name: "poststarthook/rbac/bootstrap-roles", Check: func(context.Context) error {
		if !done.Load() {
			return errors.New("not yet")
		}
		return nil
	}}}})
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	ts := &testServer{Server: hs, api: api, db: db}

	for _, ep := range []string{"readyz", "healthz"} {
		want := "[+]ping ok\n[+]store ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n" + ep + " check failed\n"
		if b := ts.mustDo(t, http.StatusInternalServerError, request{path: "/" + ep}); string(b) != want {
			t.Errorf("/%s before the hook = %q, want %q", ep, b, want)
		}
		ts.mustDo(t, http.StatusInternalServerError, request{path: "/" + ep + "/poststarthook/rbac/bootstrap-roles"})
	}
	if b := ts.mustDo(t, http.StatusOK, request{path: "/livez?verbose"}); string(b) != "[+]ping ok\n[+]store ok\nlivez check passed\n" {
		t.Errorf("/livez?verbose before the hook = %q", b)
	}
	ts.mustDo(t, http.StatusNotFound, request{path: "/livez/poststarthook/rbac/bootstrap-roles"})

	done.Store(true)
	for _, ep := range []string{"readyz", "healthz"} {
		want := "[+]ping ok\n[+]store ok\n[+]poststarthook/rbac/bootstrap-roles ok\n" + ep + " check passed\n"
		if b := ts.mustDo(t, http.StatusOK, request{path: "/" + ep + "?verbose"}); string(b) != want {
			t.Errorf("/%s?verbose after the hook = %q, want %q", ep, b, want)
		}
		if b := ts.mustDo(t, http.StatusOK, request{path: "/" + ep + "/poststarthook/rbac/bootstrap-roles"}); string(b) != "ok" {
			t.Errorf("/%s/poststarthook/rbac/bootstrap-roles = %q, want ok", ep, b)
		}
	}
}
