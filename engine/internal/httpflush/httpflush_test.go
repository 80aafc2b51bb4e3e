package httpflush

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// dropping wraps a ResponseWriter and flushes without an error, as
// httpsnoop's wrappers do.
type dropping struct{ http.ResponseWriter }

func (d dropping) Flush()                      {}
func (d dropping) Unwrap() http.ResponseWriter { return d.ResponseWriter }
func (d dropping) Write(b []byte) (int, error) { return d.ResponseWriter.Write(b) }
func (d dropping) WriteHeader(code int)        { d.ResponseWriter.WriteHeader(code) }
func (d dropping) Header() http.Header         { return d.ResponseWriter.Header() }

// reporting flushes with an error.
type reporting struct{ http.ResponseWriter }

func (r reporting) FlushError() error { return nil }

// TestErrorFlusher: behind wrappers whose Flush drops errors, the first
// writer that reports them is found; without one, the innermost writer.
func TestErrorFlusher(t *testing.T) {
	inner := reporting{httptest.NewRecorder()}
	if got := ErrorFlusher(dropping{dropping{inner}}); got != http.ResponseWriter(inner) {
		t.Errorf("ErrorFlusher behind two dropping wrappers = %T, want the reporting writer", got)
	}
	rec := httptest.NewRecorder()
	if got := ErrorFlusher(dropping{rec}); got != http.ResponseWriter(rec) {
		t.Errorf("ErrorFlusher with no reporting writer = %T, want the innermost", got)
	}
}
