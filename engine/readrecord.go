package engine

import (
	"sync"
	"time"
)

// delayedWork runs functions after a delay, and owns them: stop cancels
// those not started yet and waits for those running, so that none writes
// to a store closed after the Service stopped.
type delayedWork struct {
	mu      sync.Mutex // guards timers and closed
	timers  map[*time.Timer]bool
	closed  bool
	running sync.WaitGroup // one per timer in timers, and per fn running
}

// after runs fn after d, unless stop comes first; after close it does
// nothing.
func (w *delayedWork) after(d time.Duration, fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.timers == nil {
		w.timers = map[*time.Timer]bool{}
	}
	w.running.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer w.running.Done()
		w.mu.Lock()
		pending := w.timers[t] // t is set: after holds mu until it is
		delete(w.timers, t)
		w.mu.Unlock()
		if pending {
			fn()
		}
	})
	w.timers[t] = true
}

// stop cancels the work not started yet and waits for the work running.
func (w *delayedWork) stop() {
	w.mu.Lock()
	for t := range w.timers {
		if t.Stop() {
			w.running.Done()
		}
		delete(w.timers, t)
	}
	w.mu.Unlock()
	w.running.Wait()
}

// close stops w for good: later work is not run.
func (w *delayedWork) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.stop()
}
