package serving

import (
	"context"
	"time"
)

// waiter is one request waiting for a seat or its share.
type waiter struct {
	links[waiter]

	ready   chan struct{} // closed once the request may go on
	granted bool          // under the owner's lock
	flow    *flow         // its user's flow, in a fairQueue
}

func (w *waiter) link() *links[waiter] { return &w.links }

// await waits at most wait for w to be let go on: "" once it is, else why
// it gave up (reasonTimeout, reasonCancelled). Its owner must then check
// granted under its lock, as the grant may have come as it gave up.
func (w *waiter) await(ctx context.Context, wait time.Duration) string {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return ""
	case <-timer.C:
		return reasonTimeout
	case <-ctx.Done():
		return reasonCancelled
	}
}

// links are an element's place in a list.
type links[E any] struct{ prev, next *E }

// linked is what a linkList holds: a pointer to an E that carries its links.
type linked[E any] interface {
	*E
	link() *links[E]
}

// linkList is an intrusive doubly-linked list, first to last: the waiting
// requests of one user, or a ring of users taking turns. It allocates
// nothing; an element is in at most one linkList through its links.
type linkList[E any, P linked[E]] struct {
	first, last *E
	n           int
}

func (l *linkList[E, P]) pushBack(e *E) {
	ln := P(e).link()
	ln.prev, ln.next = l.last, nil
	if l.last != nil {
		P(l.last).link().next = e
	} else {
		l.first = e
	}
	l.last = e
	l.n++
}

func (l *linkList[E, P]) remove(e *E) {
	ln := P(e).link()
	if ln.prev != nil {
		P(ln.prev).link().next = ln.next
	} else {
		l.first = ln.next
	}
	if ln.next != nil {
		P(ln.next).link().prev = ln.prev
	} else {
		l.last = ln.prev
	}
	ln.prev, ln.next = nil, nil
	l.n--
}

// moveToBack puts e, whose turn is over, last.
func (l *linkList[E, P]) moveToBack(e *E) {
	l.remove(e)
	l.pushBack(e)
}
