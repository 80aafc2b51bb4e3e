package testsupport

import (
	"testing"
	"time"
)

// Eventually and Poll ask first after MinInterval, then half as often
// again each time up to MaxInterval: an in-process condition is seen
// soon, and one that runs a command (kubectl) is not run in a busy loop.
const (
	MinInterval = 10 * time.Millisecond
	MaxInterval = 100 * time.Millisecond
)

// Eventually calls cond until it holds, and fails t with
// "timed out waiting for <what>" when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Poll(t, timeout, what, func() (bool, string) { return cond(), "" })
}

// Poll calls cond until it reports done, and fails t when
// timeout passes first, with what and the last state cond reported (what
// it saw instead).
func Poll(t testing.TB, timeout time.Duration, what string, cond func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for wait := MinInterval; ; wait = min(wait*3/2, MaxInterval) {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			if state == "" {
				t.Fatalf("timed out after %v waiting for %s", timeout, what)
			}
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, state)
		}
		time.Sleep(wait)
	}
}
