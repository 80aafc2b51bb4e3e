package wswatch

import "sync"

// queue holds the encoded events of one connection between the watch and
// the writer, bounded in count and bytes, and tells when a writer must be
// started. It allocates nothing while empty.
type queue struct {
	maxItems, maxBytes int
	// hurry wakes a writer waiting out WriteInterval when the queue grows
	// large; made by the first wait, so that a connection that never
	// waits (an idle one) has none. Set under mu; a writer reads it after
	// its wait returned true.
	hurry chan struct{}

	mu       sync.Mutex // guards the fields below
	items    [][]byte
	bytes    int
	ended    bool // the watch ended; no more pushes
	overflow bool // a push found the queue full; no more pushes
	writing  bool // a writer runs; it will see what is pushed
	waiting  bool // the writer waits out WriteInterval; push sends on hurry once the queue is large
}

func newQueue(maxItems, maxBytes int) *queue {
	return &queue{maxItems: maxItems, maxBytes: maxBytes}
}

// push appends msg; ok is false, and the queue is marked overflowed, when
// msg does not fit. A single message larger than maxBytes fits an empty
// queue, so one large object never counts as a slow client. start tells
// the caller to start a writer.
func (q *queue) push(msg []byte) (ok, start bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended || q.overflow {
		return false, false
	}
	if len(q.items) > 0 && (len(q.items) >= q.maxItems || q.bytes+len(msg) > q.maxBytes) {
		q.overflow = true
		q.items, q.bytes = nil, 0 // dropped: the client resumes from what it got
		return false, q.startLocked()
	}
	q.items = append(q.items, msg)
	q.bytes += len(msg)
	if q.waiting && q.largeLocked() {
		q.waiting = false
		select {
		case q.hurry <- struct{}{}:
		default:
		}
	}
	return true, q.startLocked()
}

// largeLocked tells whether an eighth of the queue's bound is used: a
// burst (the initial events of a watch, a backlog replayed), which the
// writer must not hold back. The caller holds q.mu.
func (q *queue) largeLocked() bool {
	return len(q.items) >= q.maxItems/8 || q.bytes >= q.maxBytes/8
}

// wait is called by the writer before it waits out what is left of
// WriteInterval: false means the queue is large and the writer must write at
// once; true means it may wait on hurry, which push signals when the queue
// grows large meanwhile.
func (q *queue) wait() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.largeLocked() || q.ended || q.overflow {
		return false
	}
	q.waiting = true
	if q.hurry == nil {
		q.hurry = make(chan struct{}, 1)
	}
	return true
}

// waited ends a wait.
func (q *queue) waited() {
	q.mu.Lock()
	q.waiting = false
	q.mu.Unlock()
	select {
	case <-q.hurry:
	default:
	}
}

// end marks the input finished; what is queued is still delivered. start
// tells the caller to start a writer.
func (q *queue) end() (start bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended || q.overflow {
		return false
	}
	q.ended = true
	return q.startLocked()
}

func (q *queue) startLocked() bool {
	if q.writing {
		return false
	}
	q.writing = true
	return true
}

// idle reports whether there is nothing to do; then the writer must exit,
// and the next push starts another.
func (q *queue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.idleLocked()
}

// idleLocked is idle for a caller that holds q.mu.
func (q *queue) idleLocked() bool {
	if len(q.items) == 0 && !q.ended && !q.overflow {
		q.writing = false
		return true
	}
	return false
}

// take returns everything queued and the state flags. When there is
// nothing to do it returns idle, and the writer must exit: the next push
// starts another.
func (q *queue) take() (items [][]byte, ended, overflow, idle bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.idleLocked() {
		return nil, false, false, true
	}
	items, q.items, q.bytes = q.items, nil, 0
	return items, q.ended, q.overflow, false
}
