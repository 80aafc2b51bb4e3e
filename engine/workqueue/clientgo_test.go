package workqueue

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	kwq "k8s.io/client-go/util/workqueue"
)

// The tests in this file hold Queue and its rate limiters to client-go's
// workqueue, whose semantics controllers are written against: the same
// operations, on the same fake clock (a synctest bubble), must give the
// same keys in the same order, the same lengths and the same retry counts.

const (
	diffBase = 2 * time.Millisecond
	diffMax  = 50 * time.Millisecond
)

// queuePair runs every operation on a Queue and on a client-go queue and
// fails at the first answer in which they differ.
type queuePair struct {
	t      *testing.T
	ours   *Queue[string]
	theirs kwq.TypedRateLimitingInterface[string]
	log    []string // the operations so far, for the failure message
	// waiting is when each key delayed by AddAfter or AddRateLimited is
	// due, so that no two keys fall due at the same instant: the order of
	// such a tie is unspecified in both queues.
	waiting map[string]time.Time
	held    []string
}

func newQueuePair(t *testing.T) *queuePair {
	return &queuePair{
		t:    t,
		ours: New(Options[string]{RateLimiter: NewExponential[string](diffBase, diffMax)}),
		theirs: kwq.NewTypedRateLimitingQueue(
			kwq.NewTypedItemExponentialFailureRateLimiter[string](diffBase, diffMax)),
		waiting: map[string]time.Time{},
	}
}

// do runs op on both queues, lets their timers and goroutines settle, and
// compares what op returned from each.
func (p *queuePair) do(name string, op func(q diffQueue) string) {
	p.t.Helper()
	p.log = append(p.log, name)
	ours := op(p.ours)
	synctest.Wait()
	theirs := op(p.theirs)
	synctest.Wait()
	if ours != theirs {
		p.t.Fatalf("after\n  %s\nQueue: %s, client-go: %s", strings.Join(p.log, "\n  "), ours, theirs)
	}
	p.compareState()
}

// compareState compares what both queues report after each operation.
func (p *queuePair) compareState() {
	p.t.Helper()
	if a, b := p.ours.Len(), p.theirs.Len(); a != b {
		p.t.Fatalf("after\n  %s\nLen: Queue %d, client-go %d", strings.Join(p.log, "\n  "), a, b)
	}
	if a, b := p.ours.ShuttingDown(), p.theirs.ShuttingDown(); a != b {
		p.t.Fatalf("after\n  %s\nShuttingDown: Queue %v, client-go %v", strings.Join(p.log, "\n  "), a, b)
	}
}

// diffQueue is what both queues offer.
type diffQueue interface {
	Add(string)
	Get() (string, bool)
	Done(string)
	Len() int
	AddAfter(string, time.Duration)
	AddRateLimited(string)
	Forget(string)
	NumRequeues(string) int
	ShutDown()
	ShuttingDown() bool
}

var (
	_ diffQueue = (*Queue[string])(nil)
	_ diffQueue = kwq.TypedRateLimitingInterface[string](nil)
)

// delay reports whether a delay of d for key keeps every waiting key's due
// time distinct, and records the key's due time when it does.
func (p *queuePair) delay(key string, d time.Duration) bool {
	now := time.Now()
	for k, at := range p.waiting {
		if !at.After(now) {
			delete(p.waiting, k)
		}
	}
	if d <= 0 || p.ours.ShuttingDown() {
		return true
	}
	at := now.Add(d)
	if cur, ok := p.waiting[key]; ok && !at.Before(cur) {
		return true // the earlier time stands
	}
	for k, other := range p.waiting {
		if k != key && other.Equal(at) {
			return false
		}
	}
	p.waiting[key] = at
	return true
}

func (p *queuePair) step(rnd *rand.Rand, keys []string) {
	key := keys[rnd.IntN(len(keys))]
	switch n := rnd.IntN(100); {
	case n < 25:
		p.do("Add "+key, func(q diffQueue) string { q.Add(key); return "" })
	case n < 45:
		if p.ours.Len() == 0 && !p.ours.ShuttingDown() {
			return // Get would block
		}
		p.do("Get", func(q diffQueue) string {
			item, shutdown := q.Get()
			return fmt.Sprintf("%q shutdown=%v", item, shutdown)
		})
		p.held = heldKeys(p.ours)
	case n < 60:
		if len(p.held) == 0 {
			return
		}
		k := p.held[rnd.IntN(len(p.held))]
		p.do("Done "+k, func(q diffQueue) string { q.Done(k); return "" })
		p.held = heldKeys(p.ours)
	case n < 70:
		d := time.Duration(rnd.IntN(40)-5) * time.Millisecond
		if !p.delay(key, d) {
			return
		}
		p.do(fmt.Sprintf("AddAfter %s %v", key, d), func(q diffQueue) string { q.AddAfter(key, d); return "" })
	case n < 80:
		if !p.delay(key, backoff(diffBase, diffMax, p.ours.NumRequeues(key))) {
			return
		}
		p.do("AddRateLimited "+key, func(q diffQueue) string { q.AddRateLimited(key); return "" })
	case n < 85:
		p.do("Forget "+key, func(q diffQueue) string { q.Forget(key); return "" })
	case n < 90:
		p.do("NumRequeues "+key, func(q diffQueue) string { return fmt.Sprint(q.NumRequeues(key)) })
	default:
		d := time.Duration(rnd.IntN(20)) * time.Millisecond
		p.log = append(p.log, fmt.Sprint("sleep ", d))
		time.Sleep(d)
		synctest.Wait()
		p.compareState()
	}
}

// heldKeys returns the keys between Get and Done, sorted (so that a seed
// picks the same key on every run).
func heldKeys(q *Queue[string]) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Sorted(maps.Keys(q.processing))
}

// TestQueueMatchesClientGo runs random sequences of operations (fixed
// seeds) on a Queue and on client-go's rate-limiting queue, and then shuts
// both down and drains them.
func TestQueueMatchesClientGo(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rnd := rand.New(rand.NewPCG(seed, 14))
				keys := []string{"a", "b", "c", "d", "e", "f"}[:2+rnd.IntN(5)]
				p := newQueuePair(t)
				for range 300 {
					p.step(rnd, keys)
				}
				// Keys still waiting are dropped by ShutDown in both.
				p.do("ShutDown", func(q diffQueue) string { q.ShutDown(); return "" })
				for range 3 {
					p.step(rnd, keys) // no-ops after ShutDown, Get drains
				}
				for p.ours.Len() > 0 {
					p.do("Get", func(q diffQueue) string {
						item, shutdown := q.Get()
						return fmt.Sprintf("%q shutdown=%v", item, shutdown)
					})
				}
				p.do("Get", func(q diffQueue) string {
					item, shutdown := q.Get()
					return fmt.Sprintf("%q shutdown=%v", item, shutdown)
				})
			})
		})
	}
}

// TestQueueMatchesClientGoTable runs fixed sequences that random ones
// reach only by chance.
func TestQueueMatchesClientGoTable(t *testing.T) {
	type op struct {
		name string
		arg  string
		d    time.Duration
	}
	for _, tc := range []struct {
		name string
		ops  []op
	}{
		{name: "re-added while held comes back after Done", ops: []op{
			{name: "Add", arg: "a"}, {name: "Add", arg: "b"}, {name: "Get"}, {name: "Add", arg: "a"},
			{name: "Get"}, {name: "Done", arg: "a"}, {name: "Get"}, {name: "Done", arg: "b"}, {name: "Done", arg: "a"}}},
		{name: "the earlier of two delays wins", ops: []op{
			{name: "AddAfter", arg: "a", d: 30 * time.Millisecond}, {name: "AddAfter", arg: "a", d: 10 * time.Millisecond},
			{name: "AddAfter", arg: "a", d: 20 * time.Millisecond}, {name: "Sleep", d: 10 * time.Millisecond}, {name: "Get"},
			{name: "Done", arg: "a"}, {name: "Sleep", d: 30 * time.Millisecond}}},
		{name: "delayed keys come out in due order", ops: []op{
			{name: "AddAfter", arg: "c", d: 3 * time.Millisecond}, {name: "AddAfter", arg: "a", d: 2 * time.Millisecond},
			{name: "AddAfter", arg: "b", d: time.Millisecond}, {name: "Add", arg: "d"}, {name: "Sleep", d: 5 * time.Millisecond},
			{name: "Get"}, {name: "Get"}, {name: "Get"}, {name: "Get"}}},
		{name: "backoff doubles and Forget resets it", ops: []op{
			{name: "AddRateLimited", arg: "a"}, {name: "AddRateLimited", arg: "a"}, {name: "AddRateLimited", arg: "a"},
			{name: "Sleep", d: time.Millisecond}, {name: "Sleep", d: time.Millisecond}, {name: "Get"}, {name: "Done", arg: "a"},
			{name: "Forget", arg: "a"}, {name: "AddRateLimited", arg: "a"}, {name: "Sleep", d: diffBase}, {name: "Get"}}},
		{name: "ShutDown drops delayed keys and hands out ready ones", ops: []op{
			{name: "Add", arg: "a"}, {name: "AddAfter", arg: "b", d: time.Millisecond}, {name: "ShutDown"},
			{name: "Add", arg: "c"}, {name: "AddRateLimited", arg: "c"}, {name: "Sleep", d: 5 * time.Millisecond},
			{name: "Get"}, {name: "Get"}}},
		{name: "a non-positive delay adds at once", ops: []op{
			{name: "AddAfter", arg: "a", d: 0}, {name: "AddAfter", arg: "b", d: -time.Second}, {name: "Get"}, {name: "Get"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newQueuePair(t)
				for _, o := range tc.ops {
					name := strings.TrimSpace(fmt.Sprint(o.name, " ", o.arg, " ", o.d))
					switch o.name {
					case "Add":
						p.do(name, func(q diffQueue) string { q.Add(o.arg); return "" })
					case "Get":
						p.do(name, func(q diffQueue) string {
							item, shutdown := q.Get()
							return fmt.Sprintf("%q shutdown=%v", item, shutdown)
						})
					case "Done":
						p.do(name, func(q diffQueue) string { q.Done(o.arg); return "" })
					case "AddAfter":
						p.do(name, func(q diffQueue) string { q.AddAfter(o.arg, o.d); return "" })
					case "AddRateLimited":
						p.do(name, func(q diffQueue) string {
							q.AddRateLimited(o.arg)
							return fmt.Sprint(q.NumRequeues(o.arg))
						})
					case "Forget":
						p.do(name, func(q diffQueue) string { q.Forget(o.arg); return fmt.Sprint(q.NumRequeues(o.arg)) })
					case "ShutDown":
						p.do(name, func(q diffQueue) string { q.ShutDown(); return "" })
					case "Sleep":
						p.log = append(p.log, name)
						time.Sleep(o.d)
						synctest.Wait()
						p.compareState()
					default:
						t.Fatalf("unknown op %q", o.name)
					}
				}
				p.ours.ShutDown()
				p.theirs.ShutDown()
			})
		})
	}
}

// TestDefaultRateLimiterMatchesClientGo holds DefaultRateLimiter to
// client-go's DefaultTypedControllerRateLimiter, which it copies (per-key
// exponential backoff and an overall token bucket): the same retries,
// successes and waits give the same delays and counts.
func TestDefaultRateLimiterMatchesClientGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ours := DefaultRateLimiter[string]()
		theirs := kwq.DefaultTypedControllerRateLimiter[string]()
		rnd := rand.New(rand.NewPCG(7, 14))
		keys := []string{"a", "b", "c"}
		var log []string
		for i := range 2000 {
			key := keys[rnd.IntN(len(keys))]
			switch n := rnd.IntN(10); {
			case n < 7:
				a, b := ours.When(key), theirs.When(key)
				log = append(log, fmt.Sprintf("When %s = %v", key, a))
				if a != b {
					t.Fatalf("op %d: When(%s) = %v, client-go %v; after %v", i, key, a, b, log[max(0, len(log)-10):])
				}
			case n < 8:
				ours.Forget(key)
				theirs.Forget(key)
				log = append(log, "Forget "+key)
			default:
				d := time.Duration(rnd.IntN(200)) * time.Millisecond
				time.Sleep(d)
				log = append(log, fmt.Sprint("sleep ", d))
			}
			if a, b := ours.NumRequeues(key), theirs.NumRequeues(key); a != b {
				t.Fatalf("op %d: NumRequeues(%s) = %d, client-go %d", i, key, a, b)
			}
		}
	})
}
