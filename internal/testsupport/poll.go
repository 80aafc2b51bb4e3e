package testsupport

import (
	"testing"
	"time"
)

// Interval is how often Poll and Eventually ask again.
const Interval = 10 * time.Millisecond

// Poll calls cond every Interval until it returns nil, and fails t with
// the last error cond returned when timeout passes first. cond's error
// says what it is waiting for and what it saw instead.
func Poll(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(Interval)
	}
}

// Eventually calls cond every Interval until it holds, and fails t with
// "timed out waiting for <what>" when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(Interval)
	}
}
