package serving

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// shareTry starts acquire for user in a goroutine and returns a channel
// that gets its admission.
func shareTry(s *fairShare, ctx context.Context, user string) <-chan admission {
	c := make(chan admission, 1)
	go func() { c <- s.acquire(ctx, user) }()
	return c
}

// waiting tells whether c has no admission yet once every goroutine of the
// bubble is blocked.
func waiting(c <-chan admission) bool {
	synctest.Wait()
	select {
	case a := <-c:
		panic("admitted: " + a.rejected)
	default:
		return true
	}
}

func mustAdmit(t *testing.T, s *fairShare, user string) {
	t.Helper()
	if a := s.acquire(context.Background(), user); a.rejected != "" || a.queued {
		t.Fatalf("%s: %+v, want admitted at once", user, a)
	}
}

// TestFairShareLoneUser checks that a user alone is never held back,
// however far past the budget it goes, and pays no allocation.
func TestFairShareLoneUser(t *testing.T) {
	s := newFairShare(2, time.Second, nil)
	for range 10 {
		mustAdmit(t, s, "alice")
	}
	for range 10 {
		s.release("alice")
	}
	if allocs := testing.AllocsPerRun(100, func() {
		s.acquire(context.Background(), "alice")
		s.release("alice")
	}); allocs != 0 {
		t.Errorf("%v allocations per request, want 0", allocs)
	}
}

// TestFairShareHoldsUserAtShare checks the rule: past the budget, with two
// users active, the one holding its share waits and the other goes on at
// once; the waiting one goes on once the budget has room, and a user whose
// last request ended still counts as active for fairShareLinger.
func TestFairShareHoldsUserAtShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFairShare(4, time.Minute, nil)
		for range 4 {
			mustAdmit(t, s, "alice") // alone: up to the budget and past it
		}
		mustAdmit(t, s, "bob") // under his share (4/2) although the budget is spent
		a5 := shareTry(s, context.Background(), "alice")
		waiting(a5)
		mustAdmit(t, s, "bob") // still under his share

		s.release("bob")
		s.release("bob")
		// bob has nothing in flight but lingers: alice, at 4 of a budget
		// of 4, still waits.
		waiting(a5)
		s.release("alice") // 3 in flight: room in the budget
		synctest.Wait()
		if a := <-a5; a.rejected != "" || !a.queued {
			t.Fatalf("alice's fifth: %+v, want admitted after waiting", a)
		}

		// bob's linger over, alice is alone and goes past the budget.
		time.Sleep(fairShareLinger + time.Millisecond)
		mustAdmit(t, s, "alice")
		mustAdmit(t, s, "alice")
		if got := s.activeLocked(time.Now()); got != 1 {
			t.Errorf("%d active users, want 1", got)
		}
		for range 6 {
			s.release("alice")
		}
	})
}

// TestFairShareRoundRobin checks that seats given back go to the users
// waiting in turn, not to whoever has the most requests waiting, and that
// a lingering user leaving lets the last one go past the budget.
func TestFairShareRoundRobin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFairShare(4, time.Minute, nil)
		mustAdmit(t, s, "alice")
		mustAdmit(t, s, "alice")
		mustAdmit(t, s, "bob")
		mustAdmit(t, s, "bob")
		var as, bs []<-chan admission
		for range 3 {
			as = append(as, shareTry(s, context.Background(), "alice"))
			synctest.Wait()
		}
		bs = append(bs, shareTry(s, context.Background(), "bob"))
		waiting(bs[0])

		s.release("alice") // alice 1, bob 2: the next in turn is alice
		synctest.Wait()
		if a := <-as[0]; a.rejected != "" {
			t.Fatalf("alice: %+v", a)
		}
		// alice 1 again: bob's turn now, and then alice, under her share
		// of 2 although the budget is spent.
		s.release("alice")
		synctest.Wait()
		if a := <-bs[0]; a.rejected != "" {
			t.Fatalf("bob: %+v", a)
		}
		if a := <-as[1]; a.rejected != "" {
			t.Fatalf("alice under her share: %+v", a)
		}
		waiting(as[2]) // alice 2, bob 3 of a budget of 4
		s.release("bob")
		waiting(as[2]) // 4 of 4, alice at her share
		s.release("bob")
		synctest.Wait()
		if a := <-as[2]; a.rejected != "" {
			t.Fatalf("alice with room in the budget: %+v", a)
		}
		if s.waiting != 0 || s.held != 4 {
			t.Errorf("%d waiting, %d held; want 0 and 4", s.waiting, s.held)
		}
	})
}

// TestFairShareLingerOver checks that once the other user's linger is
// over, a seat given back lets the remaining user's waiting requests go on
// past the budget.
func TestFairShareLingerOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFairShare(4, time.Minute, nil)
		for range 5 {
			mustAdmit(t, s, "alice")
		}
		mustAdmit(t, s, "bob")
		s.release("bob")
		c1 := shareTry(s, context.Background(), "alice")
		synctest.Wait()
		c2 := shareTry(s, context.Background(), "alice")
		waiting(c2)
		time.Sleep(fairShareLinger + time.Millisecond)
		s.release("alice") // 4 held of 4, but alice is alone now
		synctest.Wait()
		for _, c := range []<-chan admission{c1, c2} {
			if a := <-c; a.rejected != "" || !a.queued {
				t.Fatalf("alice alone: %+v", a)
			}
		}
		if s.held != 6 {
			t.Errorf("%d held, want 6", s.held)
		}
	})
}

// TestFairShareGivesUp checks that a request waiting for its share gets
// time-out after the wait, and cancelled when its context ends, and that
// neither is left counted.
func TestFairShareGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFairShare(2, 100*time.Millisecond, nil)
		mustAdmit(t, s, "alice")
		mustAdmit(t, s, "alice")
		mustAdmit(t, s, "bob")
		start := time.Now()
		if a := s.acquire(context.Background(), "alice"); a.rejected != reasonTimeout || a.waited != 100*time.Millisecond {
			t.Errorf("waited out: %+v, want %s after 100ms", a, reasonTimeout)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("gave up after %v", d)
		}
		ctx, cancel := context.WithCancel(context.Background())
		c := shareTry(s, ctx, "alice")
		waiting(c)
		cancel()
		if a := <-c; a.rejected != reasonCancelled {
			t.Errorf("cancelled: %+v, want %s", a, reasonCancelled)
		}
		if s.waiting != 0 || s.held != 3 || s.users["alice"].held != 2 {
			t.Errorf("%d waiting, %d held (alice %d); want 0, 3, 2", s.waiting, s.held, s.users["alice"].held)
		}
	})
}
