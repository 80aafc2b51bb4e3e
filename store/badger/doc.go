// Package badger is Setpoint's embedded store backend: store.Store on
// github.com/dgraph-io/badger/v4 in a local data directory.
//
// # Layout on disk
//
// Badger runs in managed mode, and the store's revision is Badger's version
// timestamp, so a read at revision r is a Badger read at timestamp r. Three key
// spaces share the database:
//
//	"o" + key          the object index: one version per write of the object, at
//	                   the write's revision; a delete is a tombstone at its revision.
//	                   The value is uvarint(createRevision) followed by the document.
//	"h" + be64(last)   the history: one record per group commit, holding every
//	                   event of the group (revisions last-n+1 .. last).
//	"m" + name         metadata: the last revision and the compacted revision.
//
// # Writes and durability
//
// Writes are committed in groups by one leader at a time (commit.go): the
// first writer to find no leader becomes it, takes every write waiting, checks
// their compare-and-swap conditions in arrival order, gives them consecutive
// revisions, and writes the group as one synced Badger request, in order: the
// history record, then the object index entries, then the last revision. Then
// it acknowledges the group's writers, hands the events to the notifier, and
// goes on until its own write is done, when it passes the lead to the oldest
// waiting writer. Badger replays its write-ahead log as a prefix, and the
// record comes first, so an index entry is never on disk without its record:
// on open, the store re-applies the newest record to the index
// (idempotently), which completes a group a crash cut short.
//
// # Threads
//
//   - the write leader (commit.go) is a writer's own goroutine while it leads;
//     it owns the next revision and is the only writer of the object index and
//     the history. It publishes the committed revision (an atomic) only after a
//     group is durable and visible to reads.
//   - notifier (watch.go): owns the in-memory ring of recent events and the set
//     of live watchers (both under hub.mu); it fans each group out with
//     non-blocking sends and ends any watcher whose buffer is full with
//     store.ErrWatcherTooSlow, so a slow watcher never blocks a writer.
//   - one drain goroutine per live watcher whose small channel is full
//     (watch.go): it moves the events the notifier set aside for the watcher
//     (at most WatchBuffer) into the channel, in order, and exits when none
//     is left or the watcher ends; it then owns closing the channel.
//   - one catch-up goroutine per new watcher (watch.go): replays history from
//     the ring or from disk into the watcher's channel, then registers it with
//     the notifier and exits.
//   - compactor and value-log GC (compact.go): background loops on tickers.
//   - scrubber (health.go): every ScrubInterval checks the checksums of every
//     table file and marks the store damaged when one fails; it owns nothing.
//   - space loop (space.go): runs only while Badger is open read-only for want
//     of disk space; it reopens Badger writable, under closeMu held
//     exclusively, once space is back, and exits.
//
// # Faults
//
// Open takes an flock on setpoint.lock (lock.go) and checks every table file
// the manifest lists (verify.go) before Badger opens them; Badger then checks
// each block and value it reads. A failed read marks the store damaged
// (health.go): every later read, write and watch fails with a *DamageError
// (store.ErrCorrupt) and Health reports it. Each commit group reads the free
// space first and refuses its writes with store.ErrNoSpace below the reserve
// (space.go); Open below it opens Badger read-only.
//
// Close stops them all, waits for them, and closes Badger. Lock order:
// DB.compactMu before pins.mu; hub.mu is never held while taking another lock
// of this package. The write leader holds closeMu shared while it uses Badger
// (commit.go) and takes no other lock of this package meanwhile.
package badger
