package wswatch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// StartFunc starts the watch a connection carries. ctx ends when the
// connection does; the watch must end with it.
type StartFunc func(ctx context.Context) (watch.Interface, error)

// Server serves watches over WebSocket. It is safe for concurrent use.
type Server struct {
	opts     Options
	allowed  map[string]bool
	upgrader websocket.Upgrader
	cache    *encodeCache
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
	s := &Server{opts: opts, allowed: allowed, cache: newEncodeCache(opts.EncodeCacheSize)}
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: opts.WriteTimeout,
		// A small read buffer: clients send only pongs and close frames.
		ReadBufferSize: 512,
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

// Serve upgrades r to a WebSocket, starts the watch with start and streams
// its events until the watch ends, the client goes away or r's context ends
// (the server shutting down: close code 1001). It answers 403 before the
// upgrade when the origin is not allowed. An error from start is sent as an
// ERROR event. Serve returns when every goroutine it started has stopped;
// its error is for logging only, the client has been told.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, start StartFunc) error {
	if !s.originAllowed(r) {
		writeStatus(w, http.StatusForbidden, "origin not allowed")
		return ErrOrigin
	}
	hj := &hijacker{ResponseWriter: w}
	c, err := s.upgrader.Upgrade(hj, r, nil)
	if err != nil {
		return fmt.Errorf("wswatch: upgrade: %w", err)
	}
	log := s.opts.Logger.With("path", r.URL.Path)
	log.Debug("websocket watch opened", "subprotocol", c.Subprotocol())

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ss := &session{
		s:        s,
		c:        c,
		shutdown: r.Context(),
		bc:       hj.conn,
		q:        newQueue(s.opts.MaxQueuedEvents, s.opts.MaxQueuedBytes),
	}
	code, runErr := ss.serve(ctx, cancel, start)
	log.Debug("websocket watch closed", "code", code, "err", runErr)
	return runErr
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
