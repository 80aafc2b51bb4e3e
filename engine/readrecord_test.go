package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestDelayedWorkStopCancelsAndWaits checks the owner of the delayed saves
// of read-schema records: stop cancels the work still waiting and returns
// only after the work running has returned; after close nothing runs.
func TestDelayedWorkStopCancelsAndWaits(t *testing.T) {
	var w delayedWork
	var ran atomic.Int32
	w.after(context.Background(), time.Hour, func(context.Context) { ran.Add(1) })

	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	w.after(context.Background(), 0, func(context.Context) {
		close(started)
		<-release
		finished.Store(true)
	})
	<-started
	stopped := stopInBackground(&w)
	select {
	case <-stopped:
		t.Fatal("stop returned while the work ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	if !finished.Load() {
		t.Error("stop returned before the running work finished")
	}

	// stop leaves w usable; close does not.
	done := make(chan struct{})
	w.after(context.Background(), 0, func(context.Context) { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("work after stop did not run")
	}
	w.close()
	w.after(context.Background(), 0, func(context.Context) { ran.Add(1) })
	time.Sleep(50 * time.Millisecond)
	w.stop()
	if n := ran.Load(); n != 0 {
		t.Errorf("%d cancelled or closed-out functions ran", n)
	}
}

// TestDelayedWorkStopEndsContext: stop ends the context of the work
// running, so that work waiting on a store call that stalls (a store cut
// off) returns, and stop with it; work started after the stop gets a
// context of its own.
func TestDelayedWorkStopEndsContext(t *testing.T) {
	var w delayedWork
	started := make(chan struct{})
	w.after(context.Background(), 0, func(ctx context.Context) {
		close(started)
		<-ctx.Done()
	})
	<-started
	stopped := stopInBackground(&w)
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("stop still waits 5s later for work whose context it should have ended")
	}
	got := make(chan error, 1)
	w.after(context.Background(), 0, func(ctx context.Context) { got <- ctx.Err() })
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("work after a stop ran with an ended context: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("work after stop did not run")
	}
	w.close()
}

// TestRunStopsDelayedSaves checks that a save of a read-schema record still
// waiting when Run returns is dropped, so that it never writes to the store
// closed after Run.
func TestRunStopsDelayedSaves(t *testing.T) {
	s := newService(t)
	var ran atomic.Bool
	s.delayed.after(context.Background(), time.Hour, func(context.Context) { ran.Store(true) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.delayed.mu.Lock()
	waiting := len(s.delayed.timers)
	s.delayed.mu.Unlock()
	if waiting != 0 || ran.Load() {
		t.Errorf("after Run returned: %d saves waiting, ran %v; want none", waiting, ran.Load())
	}
}

// TestDelayedWorkStopIgnoresRescheduling: work that stop ended and that
// schedules more on its way out (a failed settle trying again) does not
// hold stop up for the delay of what it schedules.
func TestDelayedWorkStopIgnoresRescheduling(t *testing.T) {
	var w delayedWork
	started := make(chan struct{})
	var ran atomic.Bool
	w.after(context.Background(), 0, func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		w.after(ctx, time.Hour, func(context.Context) { ran.Store(true) })
	})
	<-started
	stopped := stopInBackground(&w)
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("stop still waits 5s later for work scheduled by work it ended")
	}
	w.mu.Lock()
	waiting := len(w.timers)
	w.mu.Unlock()
	if waiting != 0 || ran.Load() {
		t.Errorf("after stop: %d waiting, ran %v; want none", waiting, ran.Load())
	}
	w.close()
}

// stopInBackground calls w.stop on a goroutine of its own and returns a
// channel closed once it has returned.
func stopInBackground(w *delayedWork) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		w.stop()
		close(stopped)
	}()
	return stopped
}
