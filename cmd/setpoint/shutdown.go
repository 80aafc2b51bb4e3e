package main

import (
	"log/slog"
	"sync"
	"time"
)

// minLoopsStop is the least time the background loops get to stop after
// the HTTP drain, even when the drain used all of --shutdown-timeout: enough
// for loops that stop promptly to close the registry and the store cleanly.
const minLoopsStop = time.Second

// waitLoops waits for wg, the background loops, until deadline (at least
// minLoopsStop from now). Past it, it logs that it abandons them and
// returns false: a plugin call stuck in a guest that ignores cancellation
// must not hold the process past --shutdown-timeout.
func waitLoops(wg *sync.WaitGroup, deadline time.Time, log *slog.Logger) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	wait := max(time.Until(deadline), minLoopsStop)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		log.Warn("background loops still running at the shutdown deadline; abandoning them (a plugin call is stuck in a guest)", "waited", wait)
		return false
	}
}
