package wswatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/watch"
)

// session is one connection. Its reader goroutine (started by Open) reads
// control frames from the client until the session ends; a writer
// goroutine runs only while there are events to write, so an idle
// connection has no goroutine of its own besides the reader and its
// watch's.
type session struct {
	s        *Server
	c        *websocket.Conn
	bc       *frameConn      // c's connection; nil if the upgrader hijacked around it
	shutdown context.Context // the connection's: done when the server stops or the request times out
	q        *queue
	encode   func(watch.Event) ([]byte, error) // Options.Encode, after the connection's conversion if any
	cache    *encodeCache                      // shared encodings of the connection's format; nil for none

	// Set by begin, read by serve once begin has returned.
	cancel       context.CancelFunc // ends the pump's context
	wi           watch.Interface    // nil when the watch did not start
	pumpDone     chan struct{}      // closed when the pump stops; nil without a pump
	stopShutdown func() bool        // unhooks the close on shutdown

	writers   sync.WaitGroup // the writer goroutine, while one runs
	lastWrite time.Time      // owned by the running writer; handed on through q
	hold      *time.Timer    // the writer's wait for WriteInterval; owned like lastWrite

	mu       sync.Mutex // guards the fields below; held while a ping or the close frame is written
	finished bool       // the session is over: no more pings, no close frame
	closed   bool       // the close frame was sent, or the connection failed
	code     int        // the close code sent; 0 for none
	err      error      // why the session ended, for the log
	ping     *time.Timer
}

// begin prepares the reader and starts the watch, in the caller's
// goroutine; an error in starting it is sent as an ERROR event, then the
// close frame.
//
// Events reach the queue in one of two ways. A watch that implements
// [deliverer] (the engine's) calls deliver itself, from its own goroutine.
// Any other watch gets a pump goroutine that receives from the result
// channel and calls deliver. A push into a queue without a writer starts
// one; the writer exits when it finds nothing more to write.
func (ss *session) begin(start StartFunc) {
	o := &ss.s.opts
	c := ss.c
	c.SetReadLimit(o.ReadLimit)
	ss.extendRead()
	c.SetPongHandler(func(string) error { ss.extendRead(); return nil })

	// The watch runs under the server's shutdown context and ends with
	// Stop: a context of its own would cost an idle session about half a
	// kilobyte, and only a pump needs one.
	ss.cancel = func() {}
	wi, err := start(ss.shutdown)
	if err != nil {
		msg, encErr := o.Encode(errorEvent(err))
		switch {
		case encErr != nil:
			ss.close(websocket.CloseInternalServerErr, "encode error", encErr)
		default:
			if werr := ss.writeBatch([][]byte{msg}); werr != nil {
				ss.fail(werr)
			} else {
				ss.close(websocket.CloseNormalClosure, reasonEnded, fmt.Errorf("wswatch: start watch: %w", err))
			}
		}
		return
	}
	ss.wi = wi
	if d, ok := wi.(deliverer); ok {
		d.Deliver(ss.deliver, ss.end)
	} else {
		ctx, cancel := context.WithCancel(ss.shutdown)
		ss.cancel = cancel
		ss.pumpDone = make(chan struct{})
		go ss.pump(ctx, wi, ss.pumpDone)
	}
	ss.mu.Lock()
	ss.ping = time.AfterFunc(o.PingInterval, ss.sendPing)
	ss.mu.Unlock()
	ss.stopShutdown = context.AfterFunc(ss.shutdown, func() {
		code, reason := ss.endCode()
		ss.close(code, reason, nil)
	})
}

// serve is the reader goroutine: it reads until the session ends, then
// stops what begin started and waits for it. It returns the close code
// sent (0 for none) and the session's error.
//
// The session ends when the reader returns: the client went away or was
// silent too long, or a close frame was sent (the watch ended, the client
// was too slow, the server is stopping) and the client answered it or
// CloseGrace passed.
func (ss *session) serve() (int, error) {
	ss.read()
	if ss.stopShutdown != nil {
		ss.stopShutdown()
	}
	code, err := ss.finish()
	ss.cancel()
	if ss.wi != nil {
		ss.wi.Stop()
	}
	if ss.pumpDone != nil {
		<-ss.pumpDone
	}
	ss.writers.Wait()
	return code, err
}

// finish ends the session: no more pings or close frames, and the
// connection is closed (a writer blocked on it returns at once).
func (ss *session) finish() (int, error) {
	ss.mu.Lock()
	ss.finished = true
	if ss.ping != nil {
		ss.ping.Stop()
	}
	code, err := ss.code, ss.err
	ss.mu.Unlock()
	_ = ss.c.Close()
	return code, err
}

// read consumes control frames until the client goes away, stays silent
// past PingInterval+PongTimeout, or, once the close frame is sent, answers
// it or lets CloseGrace pass.
func (ss *session) read() {
	for {
		if _, _, err := ss.c.NextReader(); err != nil {
			return
		}
		ss.extendRead()
	}
}

// extendRead gives the client PingInterval+PongTimeout more to say
// something, unless the close frame was sent (then CloseGrace holds).
func (ss *session) extendRead() {
	o := &ss.s.opts
	ss.mu.Lock()
	if !ss.closed {
		_ = ss.c.SetReadDeadline(time.Now().Add(o.PingInterval + o.PongTimeout))
	}
	ss.mu.Unlock()
}

// close sends the close frame with code and reason, once, and gives the
// client CloseGrace to answer before the reader gives up; err is the
// session's error for the log.
func (ss *session) close(code int, reason string, err error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.finished || ss.closed {
		return
	}
	ss.closed, ss.code, ss.err = true, code, err
	o := &ss.s.opts
	msg := websocket.FormatCloseMessage(code, reason)
	if werr := ss.c.WriteControl(websocket.CloseMessage, msg, time.Now().Add(o.WriteTimeout)); werr != nil {
		_ = ss.c.Close() // no use waiting for an answer
		return
	}
	_ = ss.c.SetReadDeadline(time.Now().Add(o.CloseGrace))
}

// fail ends the session after a write error, without a close frame.
func (ss *session) fail(err error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.finished || ss.closed {
		return // the close frame went first; the reader waits for the answer
	}
	ss.closed, ss.err = true, err
	_ = ss.c.Close()
}

// sendPing is the ping timer's function; it sets the timer again.
func (ss *session) sendPing() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.finished || ss.closed {
		return
	}
	o := &ss.s.opts
	if err := ss.c.WriteControl(websocket.PingMessage, nil, time.Now().Add(o.WriteTimeout)); err != nil {
		ss.closed, ss.err = true, fmt.Errorf("wswatch: ping: %w", err)
		_ = ss.c.Close()
		return
	}
	ss.ping.Reset(o.PingInterval)
}

// endCode is the close code for a watch that ended while the client was
// still there: 1001 when the server is stopping (the request's context was
// canceled), 1000 otherwise (the watch or the request timed out).
func (ss *session) endCode() (int, string) {
	if err := ss.shutdown.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return websocket.CloseGoingAway, reasonGoingAway
	}
	return websocket.CloseNormalClosure, reasonEnded
}

// deliverer is a watch that can hand its events to a function instead of
// sending them on its result channel, which saves a goroutine per
// connection and a hand-off per event. Deliver returns once the watch has
// taken send and end; from then on the watch calls send with each event, in
// order, from one goroutine, stops when send returns false, and calls end
// once when it ends, after the last send (at once if it has already ended).
type deliverer interface {
	Deliver(send func(watch.Event) bool, end func())
}

// deliver encodes ev (converted, if the connection converts) and queues it
// for the writer. It does not block; it returns false once the watch must
// stop (the queue overflowed, or an event could not be converted or
// encoded and an ERROR event ended the stream).
func (ss *session) deliver(ev watch.Event) bool {
	var msg []byte
	var err error
	if ss.cache != nil {
		msg, err = ss.cache.encode(ev, ss.encode)
	} else {
		msg, err = ss.encode(ev)
	}
	if err != nil {
		if msg, err = ss.s.opts.Encode(errorEvent(err)); err == nil {
			ss.push(msg)
		}
		ss.end()
		return false
	}
	return ss.push(msg)
}

func (ss *session) push(msg []byte) bool {
	ok, start := ss.q.push(msg)
	if start {
		ss.startWriter()
	}
	return ok
}

// end tells the writer that the watch ended: what is queued is written,
// then the close frame.
func (ss *session) end() {
	if ss.q.end() {
		ss.startWriter()
	}
}

func (ss *session) startWriter() {
	ss.writers.Add(1)
	go ss.write()
}

// write is the writer goroutine: it writes what is queued, in batches at
// least WriteInterval apart (under a steady stream each write carries all
// that arrived meanwhile, while an event after a quiet spell goes out at
// once; a burst that fills an eighth of the queue goes out without waiting,
// so that it does not overflow the queue for want of writing), and exits
// when the queue is empty, after the close frame when the watch ended, or on
// the first error.
func (ss *session) write() {
	defer ss.writers.Done()
	o := &ss.s.opts
	for {
		// Exit at once when nothing is queued, rather than after the
		// interval: the next push starts a writer, which waits out what
		// is left of the interval then.
		if ss.q.idle() {
			return
		}
		if wait := o.WriteInterval - time.Since(ss.lastWrite); wait > 0 && ss.q.wait() {
			if ss.hold == nil {
				ss.hold = time.NewTimer(wait)
			} else {
				ss.hold.Reset(wait)
			}
			select {
			case <-ss.hold.C:
			case <-ss.q.hurry:
				ss.hold.Stop()
			}
			ss.q.waited()
		}
		items, ended, overflow, idle := ss.q.take()
		switch {
		case idle:
			return
		case overflow:
			ss.close(CloseTooSlow, reasonTooSlow, ErrTooSlow)
			return
		}
		if len(items) > 0 {
			if err := ss.writeBatch(items); err != nil {
				ss.fail(err)
				return
			}
			ss.lastWrite = time.Now()
		}
		if ended {
			code, reason := ss.endCode()
			ss.close(code, reason, nil)
			return
		}
	}
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
				ss.end()
				return
			}
			if !ss.deliver(ev) {
				return
			}
		}
	}
}
