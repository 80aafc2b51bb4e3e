package badger

import (
	"context"
	"errors"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

// Health returns nil while the store is sound, or the *DamageError (which
// wraps store.ErrCorrupt) of the damage it found. A damaged store refuses
// every read and write with that error until it is reopened; the server's
// readiness check reports it.
func (db *DB) Health() error {
	if p := db.damaged.Load(); p != nil {
		return *p
	}
	return nil
}

// Damaged reports whether the store found damaged data (a metric).
func (db *DB) Damaged() bool { return db.damaged.Load() != nil }

// readFailed handles a Badger read that failed. The store reads only what
// it wrote, so such a failure means the data on disk is damaged (Badger found
// a checksum that does not match, or a file it cannot read): the store is
// marked damaged and the error returned wraps store.ErrCorrupt. Errors of
// the request itself (a cancelled context, a closed store) pass through.
func (db *DB) readFailed(err error) error {
	var de *DamageError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, store.ErrClosed):
		return err
	case errors.As(err, &de):
	default:
		de = &DamageError{Err: err}
	}
	db.markDamaged(de)
	return de
}

// markDamaged records the first damage found, logs it once with the file,
// and refuses reads and writes from then on.
func (db *DB) markDamaged(de *DamageError) {
	err := error(de)
	if db.damaged.CompareAndSwap(nil, &err) {
		db.log.Error("store data is damaged; refusing reads and writes", "file", de.File, "err", de.Err)
	}
}

// sound returns the damage error when the store is damaged.
func (db *DB) sound() error { return db.Health() }

// scrubLoop is the scrubber goroutine: every ScrubInterval it checks the
// checksums of every table (scrub) and marks the store damaged when one fails.
func (db *DB) scrubLoop() {
	defer db.loops.Done()
	t := time.NewTicker(db.opts.ScrubInterval)
	defer t.Stop()
	for {
		select {
		case <-db.closing:
			return
		case <-t.C:
		}
		if db.Damaged() {
			return
		}
		start := time.Now()
		if err := db.scrub(); err != nil {
			if errors.Is(err, store.ErrClosed) {
				return
			}
			_ = db.readFailed(err)
			continue
		}
		db.log.Debug("store scrubbed", "took", time.Since(start))
	}
}
