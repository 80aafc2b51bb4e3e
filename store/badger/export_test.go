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
