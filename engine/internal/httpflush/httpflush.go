// Package httpflush finds, behind a chain of wrapping ResponseWriters, the
// one whose flush reports its error.
package httpflush

import "net/http"

// ErrorFlusher is the first ResponseWriter, from w inwards through Unwrap,
// whose flush reports its error (FlushError): the server's own at the
// latest. An http.ResponseController flushes through the first
// http.Flusher it finds, and a wrapper's Flush (httpsnoop's, which the
// request's instrumentation puts in front) drops the error: a flush that
// failed on an expired write deadline would then look done, and a stream
// would go on writing to a client that is not reading. Writes still go
// through w, so that what wraps it sees them.
func ErrorFlusher(w http.ResponseWriter) http.ResponseWriter {
	for {
		if _, ok := w.(interface{ FlushError() error }); ok {
			return w
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}
