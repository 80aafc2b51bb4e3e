package badger

import "github.com/setpoint-dev/setpoint/store"

// WatcherLive reports whether w, a watcher of db, has caught up and gets
// its events from the notifier, so that a test can wait for that instead of
// sleeping.
func WatcherLive(db *DB, w store.Watcher) bool {
	ww, ok := w.(*watcher)
	if !ok {
		return false
	}
	db.hub.mu.Lock()
	defer db.hub.mu.Unlock()
	_, live := db.hub.live[ww]
	return live
}

// Scrub runs one scrub of db now, as the scrubber does on its ticker, and
// marks db damaged when it finds damage.
func Scrub(db *DB) error {
	err := db.scrub()
	if err != nil {
		return db.readFailed(err)
	}
	return nil
}

// WithoutReadChecksums turns off the checksums Badger verifies on read, for
// the benchmarks that measure what they cost.
func WithoutReadChecksums(o Options) Options {
	o.noReadChecksums = true
	return o
}
