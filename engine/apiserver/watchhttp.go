package apiserver

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
	"github.com/setpoint-dev/setpoint/engine/internal/httpflush"
)

// eventWriter streams one watch's encoded events over chunked HTTP. The
// watch's own goroutine converts and encodes each event (shared with every
// other watch that sends the same one, see wswatch.Server.EncodeShared) and
// writes it on the response, and flushes once it has no other event
// waiting (DeliverFlushed), or after batchBytes: a watch pays one flush (one
// HTTP/2 frame or TLS record, one system call) per burst of events rather
// than one per event, and no hand-off to another goroutine. The request's
// goroutine waits for the watch to end.
type eventWriter struct {
	s    *Server
	conv wswatch.Conversion
	hs   *httpStream
	ctx  context.Context
	done chan struct{} // closed by end, after the last write

	// The delivering goroutine's own: bytes written since the last flush.
	unflushed int
}

func newEventWriter(ctx context.Context, s *Server, conv wswatch.Conversion, hs *httpStream) *eventWriter {
	return &eventWriter{s: s, conv: conv, hs: hs, ctx: ctx, done: make(chan struct{})}
}

// start has wi hand its events to ew: through DeliverFlushed when wi is
// the engine's watch (no goroutine of ew's own, no hand-off per event),
// else from a goroutine that reads its result channel. The returned
// function waits for that goroutine.
func (ew *eventWriter) start(wi watch.Interface) (wait func()) {
	if d, ok := wi.(interface {
		DeliverFlushed(send func(watch.Event) bool, flush func() bool, end func())
	}); ok {
		d.DeliverFlushed(ew.send, ew.flush, ew.end)
		return func() {}
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer ew.end()
		ch := wi.ResultChan()
		for {
			select {
			case ev, ok := <-ch:
				if !ok || !ew.send(ev) {
					return
				}
				if len(ch) == 0 && !ew.flush() {
					return
				}
			case <-ew.ctx.Done():
				return
			}
		}
	}()
	return func() { <-stopped }
}

// send encodes ev and writes it, flushing every batchBytes; false ends the
// watch (a write failed, or an ERROR event ends the stream).
func (ew *eventWriter) send(ev watch.Event) bool {
	b, err := ew.s.ws.EncodeShared(ev, ew.conv)
	if err != nil {
		// As over WebSocket: the ERROR event ends the stream.
		st := statusOf(err)
		if b, err = wswatch.EncodeEvent(watch.Event{Type: watch.Error, Object: &st}); err == nil {
			ew.write(b)
		}
		return false
	}
	return ew.write(b)
}

func (ew *eventWriter) write(b []byte) bool {
	if !ew.hs.write(b) {
		return false
	}
	ew.unflushed += len(b) + 1
	if ew.unflushed >= batchBytes {
		return ew.flush()
	}
	return true
}

// flush sends what was written since the last flush.
func (ew *eventWriter) flush() bool {
	if ew.unflushed == 0 {
		return true
	}
	ew.unflushed = 0
	return ew.hs.flush()
}

// end is called once, after the last send: it flushes what is left (the
// ERROR event that ended the watch, say) and lets the request's goroutine
// go.
func (ew *eventWriter) end() {
	ew.flush()
	close(ew.done)
}

// batchBytes is how many bytes of events the writer writes before it
// flushes even if more are waiting.
const batchBytes = 64 << 10

// httpStream writes a watch's events on w; each batch, from its first
// write to its flush, must be done within writeTimeout, or the stream
// ends. The deadline is a timer of the stream's own, armed while a batch is
// under way, rather than the response's write deadline set and cleared per
// batch: over HTTP/2 each SetWriteDeadline is a round trip to the
// connection's serving goroutine. When the timer fires it moves the write
// deadline into the past, which fails the write under way (HTTP/1) or
// resets the stream (HTTP/2).
type httpStream struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	flusher      bool
	deadlines    bool
	writeTimeout time.Duration

	timer   *time.Timer // nil until the first batch
	armed   bool        // the timer runs for the batch under way
	mu      sync.Mutex  // guards stopped against the timer's function
	stopped bool        // stop was called: the timer must not touch the response
	expired atomic.Bool // the timer fired
}

// newHTTPStream returns the stream of w, its batches bounded by
// writeTimeout once deadlines is set.
func newHTTPStream(w http.ResponseWriter, writeTimeout time.Duration) *httpStream {
	_, flusher := w.(http.Flusher)
	return &httpStream{w: w, rc: http.NewResponseController(httpflush.ErrorFlusher(w)), flusher: flusher, writeTimeout: writeTimeout}
}

// write writes one event and a newline; false when a write failed.
func (hs *httpStream) write(b []byte) bool {
	if hs.deadlines && !hs.armed {
		if hs.timer == nil {
			hs.timer = time.AfterFunc(hs.writeTimeout, hs.expire)
		} else {
			hs.timer.Reset(hs.writeTimeout)
		}
		hs.armed = true
	}
	if _, err := hs.w.Write(b); err != nil {
		return hs.failed()
	}
	if _, err := hs.w.Write(newline); err != nil {
		return hs.failed()
	}
	return true
}

// flush ends the batch under way; false when it failed.
func (hs *httpStream) flush() bool {
	if hs.flusher {
		if err := hs.rc.Flush(); err != nil {
			return hs.failed()
		}
	}
	hs.disarm()
	return true
}

func (hs *httpStream) failed() bool {
	hs.disarm()
	return false
}

// missed tells whether a batch missed its deadline: the stream was cut
// for a client too slow to take it, however its watch noticed (a failed
// write, or the request's context, which the failed write cancels). The
// time tells a slow client from one that went away.
func (hs *httpStream) missed() bool { return hs.expired.Load() }

func (hs *httpStream) disarm() {
	if hs.armed {
		hs.timer.Stop()
		hs.armed = false
	}
}

func (hs *httpStream) expire() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.stopped {
		return
	}
	hs.expired.Store(true)
	_ = hs.rc.SetWriteDeadline(time.Now().Add(-time.Second))
}

// stop makes sure the timer no longer touches the response; called once
// nothing more is written, before the handler returns.
func (hs *httpStream) stop() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.stopped = true
	if hs.timer != nil {
		hs.timer.Stop()
	}
}

// writeOne writes b and flushes it; false when it failed.
func (hs *httpStream) writeOne(b []byte) bool {
	if !hs.write(b) {
		return false
	}
	return hs.flush()
}
