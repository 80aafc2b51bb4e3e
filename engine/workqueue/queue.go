package workqueue

import (
	"container/heap"
	"sync"
	"time"
)

// Options tunes New. Zero values get defaults.
type Options[T comparable] struct {
	// Name labels the queue's metrics; usually the controller's name.
	Name string
	// RateLimiter decides the delay of AddRateLimited. Default:
	// DefaultRateLimiter.
	RateLimiter RateLimiter[T]
	// Metrics receives the queue's metrics. Default: none recorded.
	Metrics MetricsProvider
	// MetricsUpdatePeriod is how often the unfinished-work and
	// longest-running gauges are refreshed while keys are held. Default 500 ms.
	MetricsUpdatePeriod time.Duration
}

// Queue is a rate-limited, delaying, deduplicating work queue of keys of type
// T. See the package comment for its guarantees. All methods are safe for
// concurrent use.
type Queue[T comparable] struct {
	limiter      RateLimiter[T]
	metrics      Metrics
	hasMetrics   bool
	updatePeriod time.Duration

	// mu guards every field below. It is the only lock of a Queue; the
	// RateLimiter is called without it held.
	mu   sync.Mutex
	cond *sync.Cond // on mu; signalled when queue grows or on shutdown/Done

	// queue is the order of ready keys; every key in it is in dirty and not
	// in processing.
	queue fifo[T]
	// dirty holds the keys that need processing: those in queue and those
	// re-added while held.
	dirty map[T]struct{}
	// processing holds the keys between Get and Done.
	processing map[T]struct{}

	// addedAt is when each dirty key was added, for queue latency.
	addedAt map[T]time.Time
	// startedAt is when each held key was handed out, for work duration.
	startedAt map[T]time.Time

	// waiting holds the keys delayed by AddAfter, earliest first, and
	// waitingIndex finds a key's entry in it.
	waiting      waitHeap[T]
	waitingIndex map[T]*waitEntry[T]
	waitTimer    *time.Timer // fires at waiting[0].readyAt; nil when idle
	waitTimerAt  time.Time
	waitGen      uint64 // identifies the current waitTimer to its callback

	metricsTimer *time.Timer // refreshes the unfinished-work gauges

	shuttingDown bool
	drain        bool
}

// New returns a running queue.
func New[T comparable](opts Options[T]) *Queue[T] {
	q := &Queue[T]{
		limiter:      opts.RateLimiter,
		updatePeriod: opts.MetricsUpdatePeriod,
		dirty:        make(map[T]struct{}),
		processing:   make(map[T]struct{}),
		addedAt:      make(map[T]time.Time),
		startedAt:    make(map[T]time.Time),
		waitingIndex: make(map[T]*waitEntry[T]),
	}
	q.cond = sync.NewCond(&q.mu)
	if q.limiter == nil {
		q.limiter = DefaultRateLimiter[T]()
	}
	if q.updatePeriod <= 0 {
		q.updatePeriod = 500 * time.Millisecond
	}
	q.metrics = noMetrics()
	if opts.Metrics != nil {
		q.metrics = opts.Metrics.NewMetrics(opts.Name).withDefaults()
		q.hasMetrics = true
	}
	return q
}

// Add marks item as needing processing. It is a no-op after ShutDown.
func (q *Queue[T]) Add(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(item, time.Now())
}

func (q *Queue[T]) addLocked(item T, now time.Time) {
	if q.shuttingDown {
		return
	}
	if _, ok := q.dirty[item]; ok {
		return
	}
	q.dirty[item] = struct{}{}
	q.addedAt[item] = now
	q.metrics.Adds.Inc()
	q.metrics.Depth.Inc()
	if _, ok := q.processing[item]; ok {
		// Handed out again by Done.
		return
	}
	q.queue.push(item)
	q.cond.Signal()
}

// Len returns the number of ready keys.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queue.len()
}

// Get blocks until a key is ready and hands it to the caller, who must call
// Done with it when finished. shutdown is true, and item the zero value, once
// the queue is shut down and no key is ready.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.queue.len() == 0 && !q.shuttingDown {
		q.cond.Wait()
	}
	if q.queue.len() == 0 {
		return item, true
	}
	item = q.queue.pop()
	now := time.Now()
	q.processing[item] = struct{}{}
	delete(q.dirty, item)
	q.metrics.Depth.Dec()
	if t, ok := q.addedAt[item]; ok {
		q.metrics.Latency.Observe(now.Sub(t).Seconds())
		delete(q.addedAt, item)
	}
	q.startedAt[item] = now
	if q.hasMetrics && q.metricsTimer == nil {
		q.metricsTimer = time.AfterFunc(q.updatePeriod, q.refreshMetrics)
	}
	return item, false
}

// Done marks item as no longer held. If it was added again while held, it is
// ready again.
func (q *Queue[T]) Done(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.processing[item]; !ok {
		return
	}
	if t, ok := q.startedAt[item]; ok {
		q.metrics.WorkDuration.Observe(time.Since(t).Seconds())
		delete(q.startedAt, item)
	}
	delete(q.processing, item)
	if len(q.processing) == 0 && q.hasMetrics {
		q.updateUnfinishedLocked(time.Now()) // nothing held: both gauges 0
	}
	if _, ok := q.dirty[item]; ok {
		q.queue.push(item)
		q.cond.Signal()
	} else if len(q.processing) == 0 {
		q.cond.Broadcast() // wakes ShutDownWithDrain
	}
}

// ShutDown stops the queue: Add and AddAfter become no-ops, delayed keys are
// dropped, and Get returns shutdown once the ready keys are handed out. It
// does not wait for held keys; it cancels a ShutDownWithDrain in progress.
func (q *Queue[T]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.drain = false
	q.shutDownLocked()
}

// ShutDownWithDrain shuts the queue down as ShutDown does, then waits until
// every held key is Done (or until ShutDown is called). A worker must not call
// it: it would wait for itself.
func (q *Queue[T]) ShutDownWithDrain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.drain = true
	q.shutDownLocked()
	for q.drain && (len(q.processing) > 0 || q.queue.len() > 0) {
		q.cond.Wait()
	}
}

func (q *Queue[T]) shutDownLocked() {
	q.shuttingDown = true
	if q.waitTimer != nil {
		q.waitTimer.Stop()
		q.waitTimer = nil
	}
	if q.metricsTimer != nil {
		q.metricsTimer.Stop()
		q.metricsTimer = nil
	}
	for len(q.waiting) > 0 {
		e := heap.Pop(&q.waiting).(*waitEntry[T])
		delete(q.waitingIndex, e.item)
	}
	q.cond.Broadcast()
}

// ShuttingDown reports whether ShutDown has been called.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// refreshMetrics sets the unfinished-work gauges; it runs from metricsTimer
// and re-arms it while keys are held.
func (q *Queue[T]) refreshMetrics() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.metricsTimer = nil
	if q.shuttingDown {
		return
	}
	q.updateUnfinishedLocked(time.Now())
	if len(q.processing) > 0 {
		q.metricsTimer = time.AfterFunc(q.updatePeriod, q.refreshMetrics)
	}
}

func (q *Queue[T]) updateUnfinishedLocked(now time.Time) {
	var total, longest float64
	for _, t := range q.startedAt {
		d := now.Sub(t).Seconds()
		total += d
		if d > longest {
			longest = d
		}
	}
	q.metrics.UnfinishedWork.Set(total)
	q.metrics.LongestRunning.Set(longest)
}

// fifo is a queue of keys that reuses its backing array.
type fifo[T any] struct {
	items []T
	head  int
}

func (f *fifo[T]) len() int { return len(f.items) - f.head }

func (f *fifo[T]) push(item T) {
	if f.head > 0 && f.head >= len(f.items)/2 && len(f.items) == cap(f.items) {
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items = f.items[:n]
		f.head = 0
	}
	f.items = append(f.items, item)
}

func (f *fifo[T]) pop() T {
	var zero T
	item := f.items[f.head]
	f.items[f.head] = zero
	f.head++
	if f.head == len(f.items) {
		f.items = f.items[:0]
		f.head = 0
	}
	return item
}
