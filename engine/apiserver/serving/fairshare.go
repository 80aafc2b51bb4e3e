package serving

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// DefaultFairShareSeatsPerCPU sizes LimitOptions.FairShareSeats from the
// cores the server may use (GOMAXPROCS): past a few requests per core more
// at once only make each one slower, so that a user who keeps many in
// flight takes the CPU from one who sends one at a time.
const DefaultFairShareSeatsPerCPU = 8

// DefaultFairShareSeats is LimitOptions.FairShareSeats' default,
// DefaultFairShareSeatsPerCPU for each of GOMAXPROCS.
func DefaultFairShareSeats() int { return DefaultFairShareSeatsPerCPU * runtime.GOMAXPROCS(0) }

// fairShareLinger is how long a user whose requests have all ended still
// counts as active: a client that sends its requests one after another has
// none in flight between them, and its share must not go to the others in
// those gaps.
const fairShareLinger = time.Second

// fairShare divides a budget of seats, reads and writes together, between
// the users who are active: who have requests in flight or waiting, or had
// one end within fairShareLinger. It is work-conserving: while fewer than
// budget requests are in flight, or one user alone is active, every request
// goes on at once, so that a lone user may use every seat the in-flight
// limits allow. Past the budget, with several users active, a request of a
// user already holding its fair share (budget / active users) waits, and a
// request of a user under its share goes on at once. Seats given back go to
// the waiting users in round-robin order, each time to one the rule lets
// in. A request waits at most wait.
//
// It does not replace the in-flight limits: a request it lets go on then
// takes a seat of its class (fairQueue).
//
// The zero value is not usable; see newFairShare.
type fairShare struct {
	budget   int
	wait     time.Duration
	observer fairShareObserver // may be nil

	mu    sync.Mutex
	held  int // requests let go on and not yet ended, all users
	busy  int // users with requests held or waiting
	users map[string]*shareUser
	// idle holds the users with nothing held or waiting that still count
	// as active, the one idle longest first.
	idle linkList[shareUser, *shareUser]
	// ring holds the users with requests waiting, in the order they are
	// next considered.
	ring    linkList[shareUser, *shareUser]
	waiting int
	free    *shareUser // entries to reuse, linked by next
}

// fairShareObserver learns what the share does, for the metrics.
type fairShareObserver interface {
	// shareChanged is called, under the share's lock, with the requests
	// waiting for their share and the active users whenever either may
	// have changed.
	shareChanged(waiting, active int)
}

// shareUser is one user's state in a fairShare.
type shareUser struct {
	links[shareUser] // in idle or the ring; next also links free entries

	name    string
	held    int
	idleAt  time.Time // when held and waiting last reached zero
	inIdle  bool
	waiters linkList[waiter, *waiter] // oldest first; in the ring while any
}

func (u *shareUser) link() *links[shareUser] { return &u.links }

func newFairShare(budget int, wait time.Duration, o fairShareObserver) *fairShare {
	return &fairShare{budget: budget, wait: wait, observer: o, users: make(map[string]*shareUser)}
}

// acquire lets a request of user go on, waiting for its share if need be;
// "" when it may, which it must then end with release, or why not.
func (s *fairShare) acquire(ctx context.Context, user string) admission {
	s.mu.Lock()
	u := s.userLocked(user)
	if s.mayLocked(u, time.Time{}) {
		u.held++
		s.held++
		s.mu.Unlock()
		return admission{}
	}
	w := &waiter{ready: make(chan struct{})}
	u.waiters.pushBack(w)
	s.waiting++
	if u.waiters.n == 1 {
		s.ring.pushBack(u)
	}
	s.notifyLocked()
	s.mu.Unlock()

	start := time.Now()
	reason := w.await(ctx, s.wait)
	if reason == "" {
		return admission{queued: true, waited: time.Since(start)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted {
		return admission{queued: true, waited: time.Since(start)}
	}
	s.removeWaiterLocked(u, w)
	if u.held == 0 && u.waiters.n == 0 {
		s.idleLocked(u, time.Now())
	}
	// The request that gave up may have been what held the others back.
	s.grantLocked()
	s.notifyLocked()
	return admission{queued: true, waited: time.Since(start), rejected: reason}
}

// release ends a request acquire let go on, and lets waiting ones go on
// as the rule allows.
func (s *fairShare) release(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[user]
	u.held--
	s.held--
	if u.held == 0 && u.waiters.n == 0 {
		s.idleLocked(u, time.Now())
	}
	if s.waiting > 0 {
		s.grantLocked()
		s.notifyLocked()
	}
}

// userLocked returns user's entry, busy: taken off the idle list, or made.
func (s *fairShare) userLocked(name string) *shareUser {
	u := s.users[name]
	switch {
	case u == nil:
		u = s.free
		if u != nil {
			s.free = u.next
			*u = shareUser{name: name}
		} else {
			u = &shareUser{name: name}
		}
		s.users[name] = u
		s.busy++
		s.notifyLocked()
	case u.inIdle:
		s.idle.remove(u)
		u.inIdle = false
		s.busy++
	}
	return u
}

// mayLocked tells whether a request of u may go on now, with now the time
// or zero to read the clock only if it is needed.
func (s *fairShare) mayLocked(u *shareUser, now time.Time) bool {
	if s.held < s.budget {
		return true
	}
	if now.IsZero() {
		now = time.Now()
	}
	active := s.activeLocked(now)
	return active <= 1 || u.held < max(1, s.budget/active)
}

// activeLocked drops the idle users whose linger is over and returns the
// number of active users.
func (s *fairShare) activeLocked(now time.Time) int {
	for u := s.idle.first; u != nil && now.Sub(u.idleAt) > fairShareLinger; u = s.idle.first {
		s.idle.remove(u)
		delete(s.users, u.name)
		u.name = ""
		u.next, s.free = s.free, u
	}
	return s.busy + s.idle.n
}

// grantLocked lets waiting requests go on, one user at a time in ring
// order, while the rule lets one in.
func (s *fairShare) grantLocked() {
	now := time.Now()
	for tried := 0; s.ring.first != nil && tried < s.ring.n; {
		u := s.ring.first
		if !s.mayLocked(u, now) {
			s.ring.moveToBack(u)
			tried++
			continue
		}
		w := u.waiters.first
		s.removeWaiterLocked(u, w)
		u.held++
		s.held++
		w.granted = true
		close(w.ready)
		if u.waiters.n > 0 {
			s.ring.moveToBack(u)
		}
		tried = 0
	}
}

// removeWaiterLocked takes w out of u's waiting requests, and u out of the
// ring once it has none.
func (s *fairShare) removeWaiterLocked(u *shareUser, w *waiter) {
	u.waiters.remove(w)
	s.waiting--
	if u.waiters.n == 0 {
		s.ring.remove(u)
	}
}

// idleLocked moves u, which has nothing held or waiting, to the idle list.
func (s *fairShare) idleLocked(u *shareUser, now time.Time) {
	s.busy--
	u.idleAt = now
	u.inIdle = true
	s.idle.pushBack(u)
}

func (s *fairShare) notifyLocked() {
	if s.observer != nil {
		s.observer.shareChanged(s.waiting, s.busy+s.idle.n)
	}
}
