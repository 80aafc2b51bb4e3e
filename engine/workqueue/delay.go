package workqueue

import (
	"container/heap"
	"time"
)

// AddAfter adds item once d has passed; d <= 0 adds it now. If item is
// already waiting, the earlier of the two times wins.
func (q *Queue[T]) AddAfter(item T, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addAfterLocked(item, d)
}

// AddRateLimited adds item after the delay its RateLimiter gives, and counts
// a retry.
func (q *Queue[T]) AddRateLimited(item T) {
	d := q.limiter.When(item)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	q.metrics.Retries.Inc()
	q.addAfterLocked(item, d)
}

// Forget resets item's backoff; call it when item was processed successfully.
// It does not remove item from the queue.
func (q *Queue[T]) Forget(item T) { q.limiter.Forget(item) }

// NumRequeues returns how many times item went through AddRateLimited since it
// was last forgotten.
func (q *Queue[T]) NumRequeues(item T) int { return q.limiter.NumRequeues(item) }

func (q *Queue[T]) addAfterLocked(item T, d time.Duration) {
	if q.shuttingDown {
		return
	}
	now := time.Now()
	if d <= 0 {
		q.addLocked(item, now)
		return
	}
	at := now.Add(d)
	if e, ok := q.waitingIndex[item]; ok {
		if at.Before(e.readyAt) {
			e.readyAt = at
			heap.Fix(&q.waiting, e.index)
		}
	} else {
		e := &waitEntry[T]{item: item, readyAt: at}
		heap.Push(&q.waiting, e)
		q.waitingIndex[item] = e
	}
	q.armLocked(now)
}

// armLocked points waitTimer at the earliest waiting key.
func (q *Queue[T]) armLocked(now time.Time) {
	if len(q.waiting) == 0 {
		if q.waitTimer != nil {
			q.waitTimer.Stop()
			q.waitTimer = nil
		}
		return
	}
	next := q.waiting[0].readyAt
	if q.waitTimer != nil && !next.Before(q.waitTimerAt) {
		return
	}
	if q.waitTimer != nil {
		q.waitTimer.Stop()
	}
	q.waitTimerAt = next
	q.waitGen++
	gen := q.waitGen
	q.waitTimer = time.AfterFunc(next.Sub(now), func() { q.releaseWaiting(gen) })
}

// releaseWaiting adds the keys whose delay has passed; it runs from the
// waitTimer of generation gen and does nothing if that timer was replaced.
func (q *Queue[T]) releaseWaiting(gen uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown || gen != q.waitGen {
		return
	}
	q.waitTimer = nil
	now := time.Now()
	for len(q.waiting) > 0 && !q.waiting[0].readyAt.After(now) {
		e := heap.Pop(&q.waiting).(*waitEntry[T])
		delete(q.waitingIndex, e.item)
		q.addLocked(e.item, now)
	}
	q.armLocked(now)
}

type waitEntry[T any] struct {
	item    T
	readyAt time.Time
	index   int
}

// waitHeap orders waiting keys by readyAt; it implements heap.Interface.
type waitHeap[T any] []*waitEntry[T]

func (h waitHeap[T]) Len() int           { return len(h) }
func (h waitHeap[T]) Less(i, j int) bool { return h[i].readyAt.Before(h[j].readyAt) }
func (h waitHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *waitHeap[T]) Push(x any) {
	e := x.(*waitEntry[T])
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *waitHeap[T]) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return e
}
