package main

import (
	"fmt"
	"io"
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

// defaultStoreCloseTimeout is how long shutdown waits for the store to
// close by default (--store-close-timeout).
const defaultStoreCloseTimeout = 10 * time.Second

// closeStore closes st, waiting at most timeout. A store that does not
// close in time is left as it is and the error says so: the process exits
// anyway, and the next start replays the store's log, which holds every
// write the store acknowledged (each write group is synced before it is
// acknowledged). The Badger store's close waits for the write group in
// progress, and a write on a disk that stopped answering (a journal stalled
// on a full disk, a frozen filesystem) does not return until the disk
// answers: without the bound, the process would wait as long.
//
// It logs nothing: its error, which says why (and the free bytes, on a
// nearly full disk), is the server's result, which main reports once.
func closeStore(st io.Closer, timeout time.Duration) error {
	if closed, err := closeWithin(st, timeout); closed {
		if err != nil {
			return fmt.Errorf("close store: %w", err)
		}
		return nil
	}
	why := "a write to the disk under the data directory has not returned (a stalled or frozen filesystem)"
	if sp, ok := st.(interface{ FreeSpace() (int64, bool) }); ok {
		if free, low := sp.FreeSpace(); low {
			why = fmt.Sprintf("the disk under the data directory is nearly full (%d bytes free) and a write to it has not returned", free)
		}
	}
	return fmt.Errorf("close store: store did not close in time (--store-close-timeout %v): %s; "+
		"exiting without a clean close: the next start replays the store's log (free space or fix the disk first)", timeout, why)
}

// closeWithin closes c, waiting at most timeout; closed is false when the
// close had not returned by then (it goes on in the background, and its
// error is dropped).
func closeWithin(c io.Closer, timeout time.Duration) (closed bool, err error) {
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return true, err
	case <-t.C:
		return false, nil
	}
}
