package host

import "time"

// callClock is the sleep of one instance's guest (WASI poll_oneoff with a
// clock subscription, which a Go guest's time.Sleep becomes). wazero's own
// sleep (WithSysNanosleep) is time.Sleep: it ignores the call's context, so
// a guest asleep in the host outlives its call deadline, however the
// instance is preempted, since neither the host's loop checks nor wazero's
// close-on-context-done run while the guest is in a host function. This
// sleep ends early when the call in progress is done; the guest then runs
// on to its next preemption check, where it stops.
//
// done is the Done channel of the call (or instantiation) in progress, nil
// between calls. The instance's goroutine sets it before entering the guest
// and clears it after; the sleep runs on that same goroutine, so no lock is
// needed.
type callClock struct {
	done <-chan struct{}
}

func (c *callClock) sleep(ns int64) {
	if ns <= 0 {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.done: // a nil channel (no call) never fires
	}
}
