package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// An instance start that runs past its own budget says so; one whose
// caller's context ended first is the caller's timeout, as before.
func TestStartFailedNamesItsBudget(t *testing.T) {
	l := Limits{CallTimeout: 2 * time.Second}
	expired := func(parent context.Context, d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(parent, d)
		t.Cleanup(cancel)
		return ctx
	}
	start := expired(context.Background(), time.Nanosecond)
	<-start.Done()
	f := startFailed(context.Background(), start, start.Err(), &tailBuffer{}, l)
	if !errors.Is(f, ErrTimeout) || !strings.Contains(f.detail, "starting an instance") || !strings.Contains(f.detail, "budget of 20s") {
		t.Errorf("past the start budget: %v", f)
	}
	parent := expired(context.Background(), time.Nanosecond)
	<-parent.Done()
	start = expired(parent, time.Hour)
	f = startFailed(parent, start, start.Err(), &tailBuffer{}, l)
	if !errors.Is(f, ErrTimeout) || !strings.Contains(f.detail, "call ran past its deadline") {
		t.Errorf("past the caller's deadline: %v", f)
	}
}
