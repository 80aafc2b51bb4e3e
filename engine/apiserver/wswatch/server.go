package wswatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

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
	sess := &session{
		s:          s,
		c:          c,
		shutdown:   r.Context(),
		bc:         hj.conn,
		q:          newQueue(s.opts.MaxQueuedEvents, s.opts.MaxQueuedBytes),
		readerDone: make(chan struct{}),
	}
	go sess.read(cancel)

	code, reason, runErr := sess.run(ctx, cancel, start)
	sess.finish(code, reason)
	log.Debug("websocket watch closed", "code", code, "err", runErr)
	return runErr
}

// session is one connection. Its fields are set before the goroutines start
// and not written afterwards, except what queue guards.
type session struct {
	s          *Server
	c          *websocket.Conn
	bc         *frameConn      // c's connection; nil if the upgrader hijacked around it
	shutdown   context.Context // the request's: done when the server stops or the request times out
	q          *queue
	readerDone chan struct{}
}

// read consumes control frames until the client goes away; then it ends the
// session through cancel.
func (ss *session) read(cancel context.CancelFunc) {
	defer close(ss.readerDone)
	defer cancel()
	c, o := ss.c, &ss.s.opts
	silent := o.PingInterval + o.PongTimeout
	c.SetReadLimit(o.ReadLimit)
	_ = c.SetReadDeadline(time.Now().Add(silent))
	c.SetPongHandler(func(string) error { return c.SetReadDeadline(time.Now().Add(silent)) })
	for {
		if _, _, err := c.NextReader(); err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(silent))
	}
}

// run starts the watch and writes until it ends. It returns the close code
// and reason to send (0 for none).
//
// Events reach the queue in one of two ways. A watch that implements
// [deliverer] (the engine's) calls deliver itself, from its own goroutine;
// its result channel then only tells when it ended. Any other watch gets a
// pump goroutine that receives from the result channel and calls deliver.
//
// After a write, the next one waits until WriteInterval has passed: under a
// steady stream of events each write then carries all that arrived
// meanwhile, while an event after a quiet spell goes out at once.
func (ss *session) run(ctx context.Context, cancel context.CancelFunc, start StartFunc) (int, string, error) {
	o := &ss.s.opts
	wi, err := start(ctx)
	if err != nil {
		msg, encErr := o.Encode(errorEvent(err))
		if encErr != nil {
			return websocket.CloseInternalServerErr, "encode error", encErr
		}
		if werr := ss.writeBatch([][]byte{msg}); werr != nil {
			return 0, "", werr
		}
		return websocket.CloseNormalClosure, reasonEnded, fmt.Errorf("wswatch: start watch: %w", err)
	}
	var results <-chan watch.Event
	if d, ok := wi.(deliverer); ok {
		d.Deliver(ss.deliver)
		results = wi.ResultChan()
		defer func() {
			cancel()
			wi.Stop()
		}()
	} else {
		pumpDone := make(chan struct{})
		go ss.pump(ctx, wi, pumpDone)
		defer func() {
			cancel()
			wi.Stop()
			<-pumpDone
		}()
	}

	ping := time.NewTicker(o.PingInterval)
	defer ping.Stop()
	var (
		ready     = ss.q.ready
		hold      *time.Timer // started when events arrive within WriteInterval of the last write
		holdC     <-chan time.Time
		lastWrite time.Time
	)
	defer func() {
		if hold != nil {
			hold.Stop()
		}
	}()
	for {
		select {
		case <-ss.readerDone:
			return 0, "", nil
		case <-ss.shutdown.Done():
			return ss.endCode()
		case <-ping.C:
			if err := ss.c.WriteControl(websocket.PingMessage, nil, time.Now().Add(o.WriteTimeout)); err != nil {
				return 0, "", fmt.Errorf("wswatch: ping: %w", err)
			}
			continue
		case ev, ok := <-results:
			if !ok {
				results = nil
				ss.q.end()
			} else if !ss.deliver(ev) {
				// Not expected from a deliverer; handled all the same.
				results = nil
			}
			continue
		case <-ready:
			if wait := o.WriteInterval - time.Since(lastWrite); wait > 0 {
				if hold == nil {
					hold = time.NewTimer(wait)
				} else {
					hold.Reset(wait)
				}
				ready, holdC = nil, hold.C
				continue
			}
		case <-holdC:
			ready, holdC = ss.q.ready, nil
		}
		items, ended, overflow := ss.q.take()
		if overflow {
			return CloseTooSlow, reasonTooSlow, ErrTooSlow
		}
		if len(items) > 0 {
			if err := ss.writeBatch(items); err != nil {
				return 0, "", err
			}
			lastWrite = time.Now()
		}
		if ended {
			return ss.endCode()
		}
	}
}

// endCode is the close code for a watch that ended while the client was
// still there: 1001 when the server is stopping (the request's context was
// canceled), 1000 otherwise (the watch or the request timed out).
func (ss *session) endCode() (int, string, error) {
	if err := ss.shutdown.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return websocket.CloseGoingAway, reasonGoingAway, nil
	}
	return websocket.CloseNormalClosure, reasonEnded, nil
}

// writeBatch writes msgs, gathered into as few connection writes as
// their size allows.
func (ss *session) writeBatch(msgs [][]byte) error {
	if ss.bc != nil {
		return ss.bc.writeMessages(msgs, ss.s.opts.WriteTimeout)
	}
	for _, msg := range msgs {
		_ = ss.c.SetWriteDeadline(time.Now().Add(ss.s.opts.WriteTimeout))
		if err := ss.c.WriteMessage(websocket.TextMessage, msg); err != nil {
			return fmt.Errorf("wswatch: write: %w", err)
		}
	}
	return nil
}

// deliverer is a watch that can hand its events to a function instead of
// sending them on its result channel, which saves a goroutine per
// connection and a hand-off per event. Deliver returns once the watch has
// taken fn; from then on the watch calls fn with each event, in order, from
// one goroutine, and stops when fn returns false. Its result channel still
// closes when it ends, after the last call.
type deliverer interface {
	Deliver(fn func(watch.Event) bool)
}

// deliver encodes ev and queues it for the writer. It does not block; it
// returns false once the watch must stop (the queue overflowed, or an
// event could not be encoded and an ERROR event ended the stream).
func (ss *session) deliver(ev watch.Event) bool {
	msg, err := ss.s.cache.encode(ev, ss.s.opts.Encode)
	if err != nil {
		if msg, err = ss.s.opts.Encode(errorEvent(err)); err == nil {
			ss.q.push(msg)
		}
		ss.q.end()
		return false
	}
	return ss.q.push(msg)
}

// pump moves events from a watch that is not a deliverer to the queue
// until the watch ends, ctx ends or the queue overflows.
func (ss *session) pump(ctx context.Context, wi watch.Interface, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				ss.q.end()
				return
			}
			if !ss.deliver(ev) {
				return
			}
		}
	}
}

// finish sends the close frame (when code is not 0), waits a little for the
// client's, and closes the connection; then it waits for the reader.
func (ss *session) finish(code int, reason string) {
	if code != 0 {
		select {
		case <-ss.readerDone:
		default:
			msg := websocket.FormatCloseMessage(code, reason)
			if err := ss.c.WriteControl(websocket.CloseMessage, msg, time.Now().Add(ss.s.opts.WriteTimeout)); err == nil {
				t := time.NewTimer(ss.s.opts.CloseGrace)
				select {
				case <-ss.readerDone:
				case <-t.C:
				}
				t.Stop()
			}
		}
	}
	_ = ss.c.Close()
	<-ss.readerDone
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
