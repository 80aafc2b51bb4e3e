package wswatch

import "sync"

// queue holds the encoded events of one connection between the pump and the
// writer, bounded in count and bytes. It allocates nothing while empty.
type queue struct {
	maxItems, maxBytes int
	ready              chan struct{} // one pending wake-up for the writer

	mu       sync.Mutex // guards the fields below
	items    [][]byte
	bytes    int
	ended    bool // the watch ended; no more pushes
	overflow bool // a push found the queue full; no more pushes
}

func newQueue(maxItems, maxBytes int) *queue {
	return &queue{maxItems: maxItems, maxBytes: maxBytes, ready: make(chan struct{}, 1)}
}

// push appends msg; it returns false, and marks the queue overflowed, when
// msg does not fit. A single message larger than maxBytes fits an empty
// queue, so one large object never counts as a slow client.
func (q *queue) push(msg []byte) bool {
	q.mu.Lock()
	if q.ended || q.overflow {
		q.mu.Unlock()
		return false
	}
	if len(q.items) > 0 && (len(q.items) >= q.maxItems || q.bytes+len(msg) > q.maxBytes) {
		q.overflow = true
		q.items, q.bytes = nil, 0 // dropped: the client resumes from what it got
		q.mu.Unlock()
		q.wake()
		return false
	}
	q.items = append(q.items, msg)
	q.bytes += len(msg)
	q.mu.Unlock()
	q.wake()
	return true
}

// end marks the input finished; what is queued is still delivered.
func (q *queue) end() {
	q.mu.Lock()
	q.ended = true
	q.mu.Unlock()
	q.wake()
}

// take returns everything queued and the state flags.
func (q *queue) take() (items [][]byte, ended, overflow bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	items, q.items, q.bytes = q.items, nil, 0
	return items, q.ended, q.overflow
}

func (q *queue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}
