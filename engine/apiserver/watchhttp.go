package apiserver

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
)

// httpQueue is how many encoded events a watch over plain HTTP may have
// waiting for its writer. The watch's goroutine waits when it is full (the
// store's own buffer then holds the backlog, and ends a watch that falls
// too far behind), so it bounds memory and lets the writer find several
// events at once without cutting a watch off by itself.
const httpQueue = 64

// eventWriter streams one watch's encoded events over chunked HTTP. The
// watch's goroutine converts and encodes each event (shared with every
// other watch that sends the same one, see wswatch.Server.EncodeShared)
// and queues it; the request's goroutine writes whatever is queued, then
// flushes once, so a watch that is behind pays one flush (one HTTP/2 frame
// or TLS record, one system call) per batch rather than one per event.
type eventWriter struct {
	s    *Server
	conv wswatch.Conversion
	q    chan []byte   // encoded events; closed by the watch's goroutine after its last one
	quit chan struct{} // closed by the writer when it stops reading q
	ctx  context.Context

	slow atomic.Bool // the store ended the watch for falling behind
}

func newEventWriter(ctx context.Context, s *Server, conv wswatch.Conversion) *eventWriter {
	return &eventWriter{s: s, conv: conv, q: make(chan []byte, httpQueue), quit: make(chan struct{}), ctx: ctx}
}

// start has wi hand its events to ew: through Deliver when wi is the
// engine's watch (no goroutine, no hand-off per event), else from a
// goroutine that reads its result channel. The returned function waits for
// that goroutine.
func (ew *eventWriter) start(wi watch.Interface) (wait func()) {
	if d, ok := wi.(interface {
		Deliver(send func(watch.Event) bool, end func())
	}); ok {
		d.Deliver(ew.send, ew.end)
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ew.end()
		for {
			select {
			case ev, ok := <-wi.ResultChan():
				if !ok || !ew.send(ev) {
					return
				}
			case <-ew.quit:
				return
			}
		}
	}()
	return func() { <-done }
}

// send encodes ev and queues it, waiting while the queue is full; false
// ends the watch (the writer stopped, or an ERROR event ends the stream).
func (ew *eventWriter) send(ev watch.Event) bool {
	if behind(ev) {
		ew.slow.Store(true)
	}
	b, err := ew.s.ws.EncodeShared(ev, ew.conv)
	if err != nil {
		// As over WebSocket: the ERROR event ends the stream.
		st := statusOf(err)
		if b, err = wswatch.EncodeEvent(watch.Event{Type: watch.Error, Object: &st}); err != nil {
			return false
		}
		ew.queue(b)
		return false
	}
	return ew.queue(b)
}

func (ew *eventWriter) queue(b []byte) bool {
	// A send that need not wait skips the select below, which locks
	// every channel it waits on.
	select {
	case ew.q <- b:
		return true
	default:
	}
	select {
	case ew.q <- b:
		return true
	case <-ew.quit:
		return false
	case <-ew.ctx.Done():
		return false
	}
}

// end is called once, after the last send.
func (ew *eventWriter) end() { close(ew.q) }

// stop tells the watch's goroutine that nothing more is read.
func (ew *eventWriter) stop() { close(ew.quit) }

// batchBytes is how many bytes of queued events the writer writes before it
// flushes even if more are queued.
const batchBytes = 64 << 10

// httpStream writes a watch's events on w, each within writeTimeout.
type httpStream struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	flusher      bool
	deadlines    bool
	writeTimeout time.Duration
	slow         bool // a write missed its deadline
}

// writeBatch writes first and whatever else is already queued on q, up to
// about batchBytes, then flushes once; false when a write failed.
func (hs *httpStream) writeBatch(first []byte, q <-chan []byte) bool {
	deadline := time.Now().Add(hs.writeTimeout)
	if hs.deadlines {
		_ = hs.rc.SetWriteDeadline(deadline)
	}
	err := hs.writeEvent(first)
	// Only this goroutine receives from q: what len counts is there.
	for n := len(first); err == nil && n < batchBytes && len(q) > 0; {
		b := <-q
		err = hs.writeEvent(b)
		n += len(b)
	}
	if err == nil && hs.flusher {
		err = hs.rc.Flush()
	}
	if err == nil && hs.deadlines {
		_ = hs.rc.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		// HTTP/1 reports the deadline; HTTP/2 resets the stream, so the
		// time tells a slow client from one that went away.
		if hs.deadlines && (errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(deadline)) {
			hs.slow = true
		}
		return false
	}
	return true
}

func (hs *httpStream) writeEvent(b []byte) error {
	if _, err := hs.w.Write(b); err != nil {
		return err
	}
	_, err := hs.w.Write(newline)
	return err
}
