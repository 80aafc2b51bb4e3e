package apiserver

import (
	"net/http"
	"testing"
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
