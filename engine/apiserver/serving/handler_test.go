package serving

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProfiling(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteStatus(w, http.StatusNotFound, "NotFound", "the API has no "+r.URL.Path)
	})
	get := func(h http.Handler, path, token string) (int, string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	on := NewHandler(HandlerOptions{API: api, Token: "secret", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Profiling: true})
	for _, tt := range []struct{ path, want string }{
		{"/debug/pprof/", "goroutine"},
		{"/debug/pprof/heap?debug=1", "heap profile"},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile"},
		{"/debug/pprof/cmdline", ""},
	} {
		if code, body := get(on, tt.path, "secret"); code != http.StatusOK || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s: %d %.200s; want 200 with %q", tt.path, code, body, tt.want)
		}
	}
	if code, _ := get(on, "/debug/pprof/heap", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /debug/pprof/heap without the token: %d, want 401", code)
	}
	off := NewHandler(HandlerOptions{API: api, Token: "secret", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if code, body := get(off, "/debug/pprof/", "secret"); code != http.StatusNotFound || !strings.Contains(body, "the API has no") {
		t.Errorf("GET /debug/pprof/ with profiling off: %d %s; want the API's 404", code, body)
	}
}
