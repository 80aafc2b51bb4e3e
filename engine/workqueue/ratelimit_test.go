package workqueue

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestExponentialDelays(t *testing.T) {
	tests := []struct {
		name      string
		base, max time.Duration
		failures  int // When calls before the one checked
		want      time.Duration
	}{
		{name: "first retry waits base", base: 5 * time.Millisecond, max: 1000 * time.Second, failures: 0, want: 5 * time.Millisecond},
		{name: "second retry doubles", base: 5 * time.Millisecond, max: 1000 * time.Second, failures: 1, want: 10 * time.Millisecond},
		{name: "tenth retry", base: 5 * time.Millisecond, max: 1000 * time.Second, failures: 9, want: 5 * time.Millisecond << 9},
		{name: "capped at max", base: 5 * time.Millisecond, max: 1000 * time.Second, failures: 30, want: 1000 * time.Second},
		{name: "no overflow after very many retries", base: 5 * time.Millisecond, max: 1000 * time.Second, failures: 200, want: 1000 * time.Second},
		{name: "max below base caps at max", base: time.Second, max: time.Millisecond, failures: 0, want: time.Millisecond},
		{name: "zero base never waits", base: 0, max: time.Second, failures: 3, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewExponential[string](tt.base, tt.max)
			for range tt.failures {
				e.When("a")
			}
			if got := e.When("a"); got != tt.want {
				t.Fatalf("When = %v, want %v", got, tt.want)
			}
			if got := e.When("b"); got != min(tt.base, tt.max) {
				t.Fatalf("another key: When = %v, want %v", got, min(tt.base, tt.max))
			}
			if got := e.NumRequeues("a"); got != tt.failures+1 {
				t.Fatalf("NumRequeues = %d, want %d", got, tt.failures+1)
			}
			e.Forget("a")
			if got := e.NumRequeues("a"); got != 0 {
				t.Fatalf("NumRequeues after Forget = %d", got)
			}
		})
	}
}

func TestBucketLimitsOverallRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket[int](DefaultQPS, DefaultBurst)
		for i := range DefaultBurst {
			if d := b.When(i); d != 0 {
				t.Fatalf("retry %d within burst waited %v", i, d)
			}
		}
		if d := b.When(0); d != 100*time.Millisecond {
			t.Fatalf("first retry past burst waits %v, want 100ms", d)
		}
		if d := b.When(1); d != 200*time.Millisecond {
			t.Fatalf("second retry past burst waits %v, want 200ms", d)
		}
	})
}

func TestDefaultRateLimiterTakesTheLongerDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := DefaultRateLimiter[int]()
		// Exhaust the burst with other keys: the bucket now dominates.
		for i := range DefaultBurst {
			l.When(1000 + i)
		}
		if d := l.When(1); d != 100*time.Millisecond {
			t.Fatalf("bucket-bound delay = %v, want 100ms", d)
		}
		// Many failures of one key: its backoff dominates.
		for range 20 {
			l.When(2)
		}
		if d := l.When(2); d != DefaultMaxDelay {
			t.Fatalf("backoff-bound delay = %v, want %v", d, DefaultMaxDelay)
		}
		if n := l.NumRequeues(2); n != 21 {
			t.Fatalf("NumRequeues = %d, want 21", n)
		}
	})
}
