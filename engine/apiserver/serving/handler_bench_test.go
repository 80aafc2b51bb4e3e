package serving

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkHandlerCreate times the whole serving chain (instrumentation,
// authentication, impersonation, the in-flight limits and the request
// timeout, authorization) around an API that answers 201 at once, for a
// create by the admin token's holder, as test/bench/api sends: what each
// request pays before and after the API's own work.
func BenchmarkHandlerCreate(b *testing.B) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	})
	h := NewHandler(HandlerOptions{API: api, Token: "secret", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/apis/example.setpoint.dev/v1/namespaces/default/widgets", nil)
		r.Header.Set("Authorization", "Bearer secret")
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			b.Fatalf("create: %d %s", w.Code, w.Body)
		}
	}
}
