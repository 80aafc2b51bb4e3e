package wswatch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// StartFunc starts the watch a connection carries. ctx ends when the
// connection does; the watch must end with it.
type StartFunc func(ctx context.Context) (watch.Interface, error)

// Conversion turns the events of one connection into the format its
// request asked for (the REST handler's Table rows or
// PartialObjectMetadata), where the HTTP stream would convert them too.
type Conversion struct {
	// Convert returns what to send for an event, before it is encoded. It
	// is called in order, from one goroutine at a time, with every event
	// of the watch (ERROR events too, whose Status it should leave alone),
	// but not with the ERROR event that reports a failed start. An error
	// ends the watch with an ERROR event that reports it.
	Convert func(watch.Event) (watch.Event, error)
	// Format names what Convert gives, for the encode cache: connections
	// with the same Format share encoded events (never with connections of
	// another Format, nor with those that convert nothing), so Convert must
	// then be a function of the event alone. "" means the output depends on
	// the connection too (a Table's column definitions go only in its first
	// event, say): every event is then converted and encoded for this
	// connection alone. Each Format gets a cache of its own, so the set of
	// Formats must be small and fixed.
	Format string
}

// Server serves watches over WebSocket. It is safe for concurrent use.
type Server struct {
	opts     Options
	allowed  map[string]bool
	upgrader websocket.Upgrader
	cache    *encodeCache // events sent as they are

	mu     sync.Mutex              // guards caches
	caches map[string]*encodeCache // converted events, by Conversion.Format
}

// New returns a Server; it fails on a malformed or wildcard allowed origin.
func New(opts Options) (*Server, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	allowed, err := allowedOrigins(opts.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, allowed: allowed, cache: newEncodeCache(opts.EncodeCacheSize, opts.EncodeCacheBytes)}
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: opts.WriteTimeout,
		// A small read buffer of the connection's own rather than the
		// HTTP server's 4 KiB one: clients send only pongs and close
		// frames, and the HTTP server's buffers go with the request's
		// goroutine once Open returns.
		ReadBufferSize: readBufferSize,
		// Write buffers go back to the pool between messages, so an idle
		// connection holds none.
		WriteBufferPool: &sync.Pool{},
		Subprotocols:    opts.Subprotocols,
		CheckOrigin:     s.originAllowed,
		Error: func(w http.ResponseWriter, _ *http.Request, code int, reason error) {
			writeStatus(w, code, reason.Error())
		},
	}
	return s, nil
}

// IsUpgrade tells whether r asks for a WebSocket.
func IsUpgrade(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }

// readBufferSize is the connection's read buffer: gorilla reads a frame's
// header, then a control frame's payload (at most 125 bytes) whole from it;
// what a client sends besides is read through it and dropped.
const readBufferSize = 128

// Serve upgrades r to a WebSocket, starts the watch with start and streams
// its events until the watch ends, the client goes away or r's context ends
// (the server shutting down: close code 1001). It answers 403 before the
// upgrade when the origin is not allowed. An error from start is sent as an
// ERROR event. Serve returns when every goroutine it started has stopped;
// its error is for logging only, the client has been told.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, start StartFunc) error {
	return s.ServeConverted(w, r, start, Conversion{})
}

// ServeConverted is Serve with each event converted by conv before it is
// encoded; a zero conv converts nothing.
func (s *Server) ServeConverted(w http.ResponseWriter, r *http.Request, start StartFunc, conv Conversion) error {
	result := make(chan error, 1)
	if err := s.Open(r.Context(), w, r, start, conv, func(err error) { result <- err }); err != nil {
		return err
	}
	return <-result
}

// Open is ServeConverted for a connection that outlives its request's
// handler: it upgrades r, starts the watch with start (in the caller's
// goroutine) and returns once the stream runs in goroutines of its own, so
// that the handler can return and the HTTP server let go of the request's
// goroutine and buffers. ctx is the connection's context from then on, in
// place of r's (which the HTTP server cancels when the handler returns):
// start gets a context derived from it, and its end closes the connection
// as the end of r's context does for Serve (1001, or 1000 when its
// deadline passed). done is called once, from the connection's goroutine,
// when the session has ended and every goroutine it started has stopped,
// with the error Serve would return. Open returns an error, and never calls
// done, when the origin is not allowed (ErrOrigin, answered 403) or the
// upgrade failed (answered by the upgrader).
func (s *Server) Open(ctx context.Context, w http.ResponseWriter, r *http.Request, start StartFunc, conv Conversion, done func(error)) error {
	if !s.originAllowed(r) {
		writeStatus(w, http.StatusForbidden, "origin not allowed")
		return ErrOrigin
	}
	hj := &hijacker{ResponseWriter: w}
	c, err := s.upgrader.Upgrade(hj, r, nil)
	if err != nil {
		return fmt.Errorf("wswatch: upgrade: %w", err)
	}
	// The path alone, not a logger With it: that would be a handler per
	// connection, kept for as long as it is open.
	path := r.URL.Path
	s.opts.Logger.Debug("websocket watch opened", "path", path, "subprotocol", c.Subprotocol())

	ss := &session{
		s:        s,
		c:        c,
		shutdown: ctx,
		bc:       hj.conn,
		q:        newQueue(s.opts.MaxQueuedEvents, s.opts.MaxQueuedBytes),
		encode:   s.opts.Encode,
		cache:    s.cache,
	}
	if conv.Convert != nil {
		ss.encode = convertEncode(conv.Convert, s.opts.Encode)
		ss.cache = s.cacheFor(conv.Format)
	}
	ss.begin(start)
	// The reader starts on a stack of its own, small, rather than on the
	// request's, which the handler chain and the watch's start have grown.
	go func() {
		var code int
		var runErr error
		defer func() {
			// A panic here would otherwise end the process: the
			// request's recovery no longer stands above this goroutine.
			if rec := recover(); rec != nil {
				runErr = fmt.Errorf("wswatch: panic: %v", rec)
				s.opts.Logger.Error("websocket watch panicked", "path", path, "panic", fmt.Sprint(rec), "stack", string(debug.Stack()))
				_ = ss.c.Close()
			}
			s.opts.Logger.Debug("websocket watch closed", "path", path, "code", code, "err", runErr)
			if done != nil {
				done(runErr)
			}
		}()
		code, runErr = ss.serve()
	}()
	return nil
}

// convertEncode is encode after convert.
func convertEncode(convert func(watch.Event) (watch.Event, error), encode func(watch.Event) ([]byte, error)) func(watch.Event) ([]byte, error) {
	return func(ev watch.Event) ([]byte, error) {
		ev, err := convert(ev)
		if err != nil {
			return nil, err
		}
		return encode(ev)
	}
}

// cacheFor returns the encode cache of the converted format, making it on
// first use; nil for "", which is cached nowhere.
func (s *Server) cacheFor(format string) *encodeCache {
	if format == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.caches[format]
	if !ok {
		if s.caches == nil {
			s.caches = make(map[string]*encodeCache)
		}
		c = newEncodeCache(s.opts.EncodeCacheSize, s.opts.EncodeCacheBytes)
		s.caches[format] = c
	}
	return c
}

// writeStatus answers a request that was not upgraded with a meta/v1 Status.
func writeStatus(w http.ResponseWriter, code int, message string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   metav1.StatusReason(http.StatusText(code)),
		Code:     int32(code),
	}
	switch code {
	case http.StatusForbidden:
		st.Reason = metav1.StatusReasonForbidden
	case http.StatusBadRequest:
		st.Reason = metav1.StatusReasonBadRequest
	case http.StatusMethodNotAllowed:
		st.Reason = metav1.StatusReasonMethodNotAllowed
	}
	b, err := json.Marshal(&st)
	if err != nil {
		b = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// EncodeShared encodes ev as a watch stream frame (Options.Encode), through
// the cache the WebSocket connections share: the REST handler's plain HTTP
// watches use it too, so that N watchers of the same events (the shared
// initial list of watches that start together above all) encode each once
// rather than N times. convert, when not nil, converts the event first, and
// format names what it gives, as in Conversion: a conversion without a
// format is not cached.
func (s *Server) EncodeShared(ev watch.Event, conv Conversion) ([]byte, error) {
	if conv.Convert == nil {
		return s.cache.encode(ev, s.opts.Encode)
	}
	enc := convertEncode(conv.Convert, s.opts.Encode)
	if c := s.cacheFor(conv.Format); c != nil {
		return c.encode(ev, enc)
	}
	return enc(ev)
}
