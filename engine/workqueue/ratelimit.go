package workqueue

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimiter decides how long a key waits before it is retried.
type RateLimiter[T comparable] interface {
	// When returns the delay before item's next retry and counts the retry.
	When(item T) time.Duration
	// Forget clears item's retry count.
	Forget(item T)
	// NumRequeues returns item's retry count.
	NumRequeues(item T) int
}

// Default rate-limiting parameters.
const (
	DefaultBaseDelay = 5 * time.Millisecond
	DefaultMaxDelay  = 1000 * time.Second
	DefaultQPS       = 10
	DefaultBurst     = 100
)

// DefaultRateLimiter returns the limiter a Queue gets by default: the larger
// of a per-key exponential backoff from DefaultBaseDelay to DefaultMaxDelay
// and an overall token bucket of DefaultQPS with DefaultBurst.
func DefaultRateLimiter[T comparable]() RateLimiter[T] {
	return MaxOf(
		NewExponential[T](DefaultBaseDelay, DefaultMaxDelay),
		NewBucket[T](DefaultQPS, DefaultBurst),
	)
}

// Exponential delays a key by base·2^n after its n-th retry, capped at max.
type Exponential[T comparable] struct {
	base, max time.Duration

	mu       sync.Mutex
	failures map[T]int
}

// NewExponential returns a per-key exponential backoff.
func NewExponential[T comparable](base, max time.Duration) *Exponential[T] {
	return &Exponential[T]{base: base, max: max, failures: make(map[T]int)}
}

var _ RateLimiter[string] = (*Exponential[string])(nil)

// When implements RateLimiter.
func (e *Exponential[T]) When(item T) time.Duration {
	e.mu.Lock()
	n := e.failures[item]
	e.failures[item] = n + 1
	e.mu.Unlock()
	return backoff(e.base, e.max, n)
}

// backoff returns base·2^n capped at max, without overflowing.
func backoff(base, max time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 0; i < n; i++ {
		if d >= max/2 {
			return max
		}
		d *= 2
	}
	if d > max {
		return max
	}
	return d
}

// Forget implements RateLimiter.
func (e *Exponential[T]) Forget(item T) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.failures, item)
}

// NumRequeues implements RateLimiter.
func (e *Exponential[T]) NumRequeues(item T) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failures[item]
}

// Bucket limits the retries of all keys together with a token bucket.
type Bucket[T comparable] struct {
	limiter *rate.Limiter
}

// NewBucket returns an overall limit of qps retries per second with bursts of
// burst.
func NewBucket[T comparable](qps float64, burst int) *Bucket[T] {
	return &Bucket[T]{limiter: rate.NewLimiter(rate.Limit(qps), burst)}
}

var _ RateLimiter[string] = (*Bucket[string])(nil)

// When implements RateLimiter.
func (b *Bucket[T]) When(T) time.Duration { return b.limiter.Reserve().Delay() }

// Forget implements RateLimiter; a bucket keeps nothing per key.
func (b *Bucket[T]) Forget(T) {}

// NumRequeues implements RateLimiter; a bucket keeps nothing per key.
func (b *Bucket[T]) NumRequeues(T) int { return 0 }

// maxOf combines limiters: the longest delay wins.
type maxOf[T comparable] []RateLimiter[T]

// MaxOf returns a limiter whose delay is the longest of limiters' and whose
// retry count is the largest.
func MaxOf[T comparable](limiters ...RateLimiter[T]) RateLimiter[T] {
	return maxOf[T](limiters)
}

func (m maxOf[T]) When(item T) time.Duration {
	var d time.Duration
	for _, l := range m {
		d = max(d, l.When(item))
	}
	return d
}

func (m maxOf[T]) Forget(item T) {
	for _, l := range m {
		l.Forget(item)
	}
}

func (m maxOf[T]) NumRequeues(item T) int {
	var n int
	for _, l := range m {
		n = max(n, l.NumRequeues(item))
	}
	return n
}
