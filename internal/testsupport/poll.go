package testsupport

import (
	"testing"
	"time"
)

// Interval is how often Eventually and Poll ask again.
const Interval = 10 * time.Millisecond

// Eventually calls cond every Interval until it holds, and fails t with
// "timed out waiting for <what>" when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Poll(t, timeout, what, func() (bool, string) { return cond(), "" })
}

// Poll calls cond every Interval until it reports done, and fails t when
// timeout passes first, with what and the last state cond reported (what
// it saw instead).
func Poll(t testing.TB, timeout time.Duration, what string, cond func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
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
		time.Sleep(Interval)
	}
}
