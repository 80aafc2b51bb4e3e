package serving

import (
	"context"
	"sync"
	"time"
)

// Why a request waited for a seat and got none, the reason label of
// setpoint_apiserver_rejected_requests_total (kube-apiserver's priority
// and fairness names).
const (
	// reasonConcurrencyLimit: every seat was taken and queuing is off.
	reasonConcurrencyLimit = "concurrency-limit"
	// reasonQueueFull: the user's queue, or all queues together, were full.
	reasonQueueFull = "queue-full"
	// reasonTimeout: no seat came free within the queue wait timeout.
	reasonTimeout = "time-out"
	// reasonCancelled: the request ended (its client went away) while it
	// waited.
	reasonCancelled = "cancelled"
)

// fairQueue hands out a fixed number of seats. While one is free a request
// takes it at once, under one lock and without allocating; when all are
// taken, a request waits in its user's queue, and each seat given back goes
// straight to the first request of the next user in round-robin order, so
// that a user with many requests waiting gets no more of the freed seats
// than a user with one. A request waits at most wait; the queues are
// bounded per user and in all.
//
// The zero value is not usable; see newFairQueue.
type fairQueue struct {
	seats    int           // seats in all
	perUser  int           // most requests one user may have waiting; 0: no queuing
	total    int           // most requests waiting in all; negative: no bound
	wait     time.Duration // longest wait for a seat
	observer queueObserver // may be nil

	mu     sync.Mutex
	inUse  int // seats taken; while queued > 0 it equals seats
	queued int // requests waiting, in all flows
	// flows holds the users with requests waiting, each also in ring, in
	// the order in which they get the next seats.
	flows map[string]*flow
	ring  linkList[flow, *flow]
}

// queueObserver learns what the queue does, for the metrics.
type queueObserver interface {
	// queuedChanged is called, under the queue's lock, with the number of
	// requests waiting whenever it changes.
	queuedChanged(n int)
}

// flow is one user's waiting requests, in the ring while it has any.
type flow struct {
	links[flow]

	user    string
	waiters linkList[waiter, *waiter] // oldest first
}

func (f *flow) link() *links[flow] { return &f.links }

func newFairQueue(seats, perUser, total int, wait time.Duration, o queueObserver) *fairQueue {
	return &fairQueue{
		seats:    seats,
		perUser:  max(perUser, 0),
		total:    total,
		wait:     wait,
		observer: o,
		flows:    make(map[string]*flow),
	}
}

// admission is what acquire did with a request.
type admission struct {
	// queued tells whether the request waited for its seat, or for none.
	queued bool
	// waited is how long it waited.
	waited time.Duration
	// rejected is why it has no seat; "" when it has one, which it must
	// give back with release.
	rejected string
}

// acquire takes a seat for a request of user, waiting for one if need be.
func (q *fairQueue) acquire(ctx context.Context, user string) admission {
	q.mu.Lock()
	if q.inUse < q.seats {
		q.inUse++
		q.mu.Unlock()
		return admission{}
	}
	w, reason := q.enqueueLocked(user)
	q.mu.Unlock()
	if w == nil {
		return admission{rejected: reason}
	}
	start := time.Now()
	if reason = w.await(ctx, q.wait); reason == "" {
		return admission{queued: true, waited: time.Since(start)}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.granted {
		// A seat came as it gave up: it keeps the seat.
		return admission{queued: true, waited: time.Since(start)}
	}
	q.removeLocked(w)
	return admission{queued: true, waited: time.Since(start), rejected: reason}
}

// enqueueLocked puts a waiter in user's queue, or returns why it may not
// wait.
func (q *fairQueue) enqueueLocked(user string) (*waiter, string) {
	if q.perUser == 0 {
		return nil, reasonConcurrencyLimit
	}
	if q.total >= 0 && q.queued >= q.total {
		return nil, reasonQueueFull
	}
	f := q.flows[user]
	if f == nil {
		f = &flow{user: user}
		q.flows[user] = f
		q.ring.pushBack(f)
	} else if f.waiters.n >= q.perUser {
		return nil, reasonQueueFull
	}
	w := &waiter{ready: make(chan struct{}), flow: f}
	f.waiters.pushBack(w)
	q.queued++
	q.notifyLocked()
	return w, ""
}

// release gives a seat back: to the first waiting request of the next user
// in the ring, or to the free seats when nobody waits.
func (q *fairQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	f := q.ring.first
	if f == nil {
		q.inUse--
		return
	}
	w := f.waiters.first
	q.removeLocked(w)
	if f.waiters.n > 0 {
		q.ring.moveToBack(f)
	}
	w.granted = true
	close(w.ready)
}

// removeLocked takes w out of its flow, and the flow out of the ring once
// it is empty.
func (q *fairQueue) removeLocked(w *waiter) {
	f := w.flow
	f.waiters.remove(w)
	q.queued--
	if f.waiters.n == 0 {
		q.ring.remove(f)
		delete(q.flows, f.user)
	}
	q.notifyLocked()
}

func (q *fairQueue) notifyLocked() {
	if q.observer != nil {
		q.observer.queuedChanged(q.queued)
	}
}
