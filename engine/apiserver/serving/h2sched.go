package serving

import (
	"math"
	"net/http"
	"reflect"

	"golang.org/x/net/http2"
)

// ConfigureHTTP2 serves HTTP/2 on srv with x/net's server (as k8s.io/apiserver
// does) and NewWriteScheduler's scheduler in place of the round-robin one of
// the server bundled in net/http. Every other HTTP/2 setting keeps the
// bundled server's default (250 concurrent streams per connection, frame
// and window sizes, srv.HTTP2 where set), the idle timeout is srv's, and
// srv.TLSConfig is made to offer h2 and http/1.1 by ALPN, as ServeTLS
// would. Call it before Serve.
func ConfigureHTTP2(srv *http.Server) error {
	return configureHTTP2(srv, NewWriteScheduler)
}

func configureHTTP2(srv *http.Server, sched func() http2.WriteScheduler) error {
	return http2.ConfigureServer(srv, &http2.Server{NewWriteScheduler: sched})
}

// NewWriteScheduler returns an HTTP/2 write scheduler for one connection
// that does O(1) work per frame however many streams are open.
//
// Control frames (SETTINGS, PING, GOAWAY, WINDOW_UPDATE of the connection,
// RST_STREAM) go first, in order. Streams take turns, one frame each, in
// the order they became ready, and each stream's frames keep their order.
// Only streams with frames queued are in the rotation: the bundled
// round-robin scheduler visits every open stream on each Pop, so when the
// queue drains, as it does after each event of a watch fan-out, one frame
// costs a walk over all of a connection's streams (up to 250 watches).
// A stream whose next DATA frame its flow-control window does not allow
// leaves the rotation for a blocked list; since the server does not say
// which stream a WINDOW_UPDATE opened, each Pop retries one blocked stream
// while others are writable, and all of them before reporting nothing to
// write, so that a window that opens is never missed and a stalled client
// does not slow the others.
func NewWriteScheduler() http2.WriteScheduler {
	return &writeScheduler{ring: newRingScheduler(controlFrame)}
}

// writeScheduler adapts ringScheduler to http2.WriteScheduler; HTTP/2
// priorities are ignored, as by the bundled round-robin scheduler.
type writeScheduler struct {
	ring *ringScheduler[http2.FrameWriteRequest]
}

var _ http2.WriteScheduler = (*writeScheduler)(nil)

func (ws *writeScheduler) OpenStream(id uint32, _ http2.OpenStreamOptions) { ws.ring.open(id) }
func (ws *writeScheduler) CloseStream(id uint32)                           { ws.ring.close(id) }
func (ws *writeScheduler) AdjustStream(uint32, http2.PriorityParam)        {}
func (ws *writeScheduler) Push(wr http2.FrameWriteRequest)                 { ws.ring.push(wr) }
func (ws *writeScheduler) Pop() (http2.FrameWriteRequest, bool)            { return ws.ring.pop() }

// frameStreamField is the index of FrameWriteRequest's stream field, nil
// on the frames of no stream (SETTINGS, PING, GOAWAY) and on RST_STREAM.
// It is what x/net's own schedulers test to put RST_STREAM with the
// control frames, and it is not exported; nil if x/net renames it, and
// then RST_STREAM waits behind its stream's frames (TestStreamFieldFound
// fails first).
var frameStreamField = func() []int {
	f, ok := reflect.TypeFor[http2.FrameWriteRequest]().FieldByName("stream")
	if !ok || f.Type.Kind() != reflect.Pointer {
		return nil
	}
	return f.Index
}()

// controlFrame tells whether wr is for no open stream's queue: RST_STREAM,
// which carries a stream ID and no stream. A DATA frame with bytes always
// has a stream, so only the few other frames of a stream (HEADERS, the
// last empty DATA, a stream's WINDOW_UPDATE) pay for the look.
func controlFrame(wr http2.FrameWriteRequest) bool {
	if wr.DataSize() > 0 || frameStreamField == nil {
		return false
	}
	return reflect.ValueOf(wr).FieldByIndex(frameStreamField).IsNil()
}

// frame is what ringScheduler needs of a frame write request.
type frame[F any] interface {
	StreamID() uint32
	// Consume takes up to n bytes of flow-control window: see
	// http2.FrameWriteRequest.Consume.
	Consume(n int32) (F, F, int)
}

// ringScheduler is the scheduling of NewWriteScheduler, over any frame
// type so that tests can drive it with frames of their own. It is used by
// one connection's serving goroutine only.
type ringScheduler[F frame[F]] struct {
	isControl func(F) bool
	control   fifo[F]
	streams   map[uint32]*streamQueue[F] // open streams
	ready     queueList[F]               // streams with a frame to write
	blocked   queueList[F]               // streams whose next frame the window did not allow
	pool      []*streamQueue[F]
}

func newRingScheduler[F frame[F]](isControl func(F) bool) *ringScheduler[F] {
	return &ringScheduler[F]{isControl: isControl, streams: make(map[uint32]*streamQueue[F])}
}

func (rs *ringScheduler[F]) open(id uint32) {
	if rs.streams[id] != nil {
		return
	}
	var q *streamQueue[F]
	if n := len(rs.pool); n > 0 {
		q, rs.pool = rs.pool[n-1], rs.pool[:n-1]
	} else {
		q = &streamQueue[F]{}
	}
	rs.streams[id] = q
}

// close drops the stream's queued frames, as the bundled scheduler does:
// the server has already told their writers that the stream is closed.
func (rs *ringScheduler[F]) close(id uint32) {
	q := rs.streams[id]
	if q == nil {
		return
	}
	delete(rs.streams, id)
	if q.list != nil {
		q.list.remove(q)
	}
	q.frames.reset()
	rs.pool = append(rs.pool, q)
}

func (rs *ringScheduler[F]) push(wr F) {
	id := wr.StreamID()
	q := rs.streams[id]
	// Frames of no stream, of a closed one, and RST_STREAM go first.
	if id == 0 || q == nil || rs.isControl(wr) {
		rs.control.push(wr)
		return
	}
	q.frames.push(wr)
	if q.list == nil {
		rs.ready.pushBack(q)
	}
	// A blocked stream stays blocked: its first frame is still the one the
	// window did not allow.
}

func (rs *ringScheduler[F]) pop() (F, bool) {
	if !rs.control.empty() {
		return rs.control.shift(), true
	}
	// One blocked stream per Pop gets a try while others are writable,
	// so that one whose window opened waits at most a round of them.
	if rs.blocked.front != nil && rs.ready.front != nil {
		if wr, ok := rs.try(&rs.blocked); ok {
			return wr, true
		}
	}
	for rs.ready.front != nil {
		q := rs.ready.front
		rs.ready.remove(q)
		wr, ok := q.consume()
		if ok {
			if !q.frames.empty() {
				rs.ready.pushBack(q)
			}
			return wr, true
		}
		rs.blocked.pushBack(q)
	}
	// Nothing else is writable: any blocked stream whose window opened.
	for range rs.blocked.n {
		if wr, ok := rs.try(&rs.blocked); ok {
			return wr, true
		}
	}
	var zero F
	return zero, false
}

// try consumes from the front stream of l: on success the stream goes to
// the back of the ready rotation (or out of every list when it has no
// more frames), else to the back of l.
func (rs *ringScheduler[F]) try(l *queueList[F]) (F, bool) {
	q := l.front
	l.remove(q)
	wr, ok := q.consume()
	switch {
	case !ok:
		l.pushBack(q)
	case !q.frames.empty():
		rs.ready.pushBack(q)
	}
	return wr, ok
}

// streamQueue is one open stream's frames, and its place in the ready or
// the blocked list (list nil: in neither, so it has no frame queued).
type streamQueue[F frame[F]] struct {
	frames     fifo[F]
	prev, next *streamQueue[F]
	list       *queueList[F]
}

// consume takes the first frame, or as much of it as the stream's window
// allows; false when the window allows nothing.
func (q *streamQueue[F]) consume() (F, bool) {
	head := q.frames.peek()
	consumed, rest, n := (*head).Consume(math.MaxInt32)
	switch n {
	case 0:
		var zero F
		return zero, false
	case 1:
		q.frames.shift()
	default:
		*head = rest
	}
	return consumed, true
}

// queueList is a doubly linked list of streamQueues.
type queueList[F frame[F]] struct {
	front, back *streamQueue[F]
	n           int
}

func (l *queueList[F]) pushBack(q *streamQueue[F]) {
	q.list, q.prev, q.next = l, l.back, nil
	if l.back != nil {
		l.back.next = q
	} else {
		l.front = q
	}
	l.back = q
	l.n++
}

func (l *queueList[F]) remove(q *streamQueue[F]) {
	if q.prev != nil {
		q.prev.next = q.next
	} else {
		l.front = q.next
	}
	if q.next != nil {
		q.next.prev = q.prev
	} else {
		l.back = q.prev
	}
	q.list, q.prev, q.next = nil, nil, nil
	l.n--
}

// fifo is a queue of frames that reuses its array once drained.
type fifo[F any] struct {
	s    []F
	head int
}

func (f *fifo[F]) empty() bool { return f.head == len(f.s) }
func (f *fifo[F]) peek() *F    { return &f.s[f.head] }

func (f *fifo[F]) push(v F) {
	// A queue that never drains moves down rather than grow for ever.
	if len(f.s) == cap(f.s) && f.head > 0 {
		n := copy(f.s, f.s[f.head:])
		clear(f.s[n:])
		f.s, f.head = f.s[:n], 0
	}
	f.s = append(f.s, v)
}

func (f *fifo[F]) shift() F {
	v := f.s[f.head]
	var zero F
	f.s[f.head] = zero
	f.head++
	if f.head == len(f.s) {
		f.s, f.head = f.s[:0], 0
	}
	return v
}

// reset empties f, keeping a small array for reuse.
func (f *fifo[F]) reset() {
	clear(f.s)
	f.s, f.head = f.s[:0], 0
	if cap(f.s) > 16 {
		f.s = nil
	}
}
