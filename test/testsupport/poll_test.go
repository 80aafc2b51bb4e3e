package testsupport

import (
	"fmt"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

func run(f func(tb testing.TB)) (failed bool) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed != ""
	}()
	f(r)
	return false
}

func TestPoll(t *testing.T) {
	n := 0
	if run(func(tb testing.TB) {
		Poll(tb, time.Second, "the third call", func() (bool, string) {
			n++
			return n == 3, fmt.Sprint(n, " calls")
		})
	}) || n != 3 {
		t.Errorf("Poll failed or stopped early: %d calls", n)
	}
	if !run(func(tb testing.TB) {
		Poll(tb, 50*time.Millisecond, "never", func() (bool, string) { return false, "no" })
	}) {
		t.Error("Poll of a condition that never holds did not fail")
	}
	if !run(func(tb testing.TB) { Eventually(tb, 50*time.Millisecond, "never", func() bool { return false }) }) {
		t.Error("Eventually of a condition that never holds did not fail")
	}
	m := 0
	if run(func(tb testing.TB) { Eventually(tb, time.Second, "third call", func() bool { m++; return m == 3 }) }) || m != 3 {
		t.Errorf("Eventually failed or stopped early: %d calls", m)
	}
}
