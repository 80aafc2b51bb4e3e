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
	w.after(time.Hour, func() { ran.Add(1) })

	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	w.after(0, func() {
		close(started)
		<-release
		finished.Store(true)
	})
	<-started
	stopped := make(chan struct{})
	go func() {
		w.stop()
		close(stopped)
	}()
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
	w.after(0, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("work after stop did not run")
	}
	w.close()
	w.after(0, func() { ran.Add(1) })
	time.Sleep(50 * time.Millisecond)
	w.stop()
	if n := ran.Load(); n != 0 {
		t.Errorf("%d cancelled or closed-out functions ran", n)
	}
}

// TestRunStopsDelayedSaves checks that a save of a read-schema record still
// waiting when Run returns is dropped, so that it never writes to the store
// closed after Run.
func TestRunStopsDelayedSaves(t *testing.T) {
	s := newService(t)
	var ran atomic.Bool
	s.delayed.after(time.Hour, func() { ran.Store(true) })
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
