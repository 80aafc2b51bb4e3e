package badger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bdg "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/pb"

	"github.com/setpoint-dev/setpoint/store"
)

var _ store.Store = (*DB)(nil)

// DB is the Badger backend. Open one with Open; it is safe for concurrent use.
type DB struct {
	// bdb is replaced only by reopenWritable, under closeMu held exclusively.
	bdb  *bdg.DB
	bo   bdg.Options // what bdb was opened with
	opts Options
	log  *slog.Logger
	lock *dirLock

	// damaged holds the *DamageError of the first damage found (health.go).
	damaged atomic.Pointer[error]
	// space guards the free space; readOnly is set while Badger is open
	// read-only for want of it (space.go).
	space    spaceGuard
	readOnly atomic.Bool

	// committed is the revision of the last group that is durable and visible
	// to reads. Written only by the leader of the write queue.
	committed atomic.Int64

	queue    writeQueue
	notifyCh chan []store.Event // write leader to the notifier, in revision order
	failed   atomic.Pointer[error]
	// writeFault, when set (by tests), runs before each group's Badger
	// write; an error it returns fails the write as a failed sync would.
	writeFault func(last int64) error

	hub  *hub
	pins pins

	// compactMu serializes compactions. Lock order: compactMu, then pins.mu.
	compactMu sync.Mutex
	// physical is the revision up to which history records are deleted and
	// Badger may discard versions. Guarded by compactMu.
	physical int64

	// closeMu is held shared by every operation that touches Badger and
	// exclusively by Close before it closes Badger.
	closeMu   sync.RWMutex
	closed    atomic.Bool
	closing   chan struct{} // closed when Close starts
	closeOnce sync.Once
	closeErr  error
	loops     sync.WaitGroup // notifier, background loops
	watchers  sync.WaitGroup // catch-up goroutines
}

// Open opens (creating if needed) the store in dir and recovers its revision
// and history. It takes an exclusive lock on dir (a second Open fails with
// ErrLocked), checks the checksums of every table file first (a damaged one
// fails Open with a *DamageError naming it) and the logs Badger replays (an
// entry damaged before the log's end fails Open so too), and opens the store read-only
// when the disk has less free space than the reserve.
func Open(dir string, opts Options) (*DB, error) {
	opts = opts.withDefaults()
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	opened := false
	defer func() {
		if !opened {
			lock.release()
		}
	}()
	bo := badgerOptions(dir, opts)
	if err := removeEmptyValueLogs(dir, opts.Logger); err != nil {
		return nil, err
	}
	if !opts.SkipOpenVerification {
		start := time.Now()
		if err := verifyTables(dir, bo); err != nil {
			return nil, err
		}
		opts.Logger.Info("store tables verified", "dir", dir, "took", time.Since(start).Round(time.Millisecond))
	}
	// Badger replays its logs itself, cutting each at its first bad
	// entry; damage there must not drop the writes logged after it.
	start := time.Now()
	if err := verifyLogs(dir); err != nil {
		return nil, err
	}
	opts.Logger.Info("store logs verified", "dir", dir, "took", time.Since(start).Round(time.Millisecond))
	db := &DB{
		bo:       bo,
		opts:     opts,
		log:      opts.Logger,
		lock:     lock,
		notifyCh: make(chan []store.Event, 4),
		closing:  make(chan struct{}),
		space:    spaceGuard{dir: dir, reserve: max(opts.FreeSpaceReserve, 0)},
	}
	if ok, free := db.space.check(nil, 0); !ok {
		if _, err := os.Stat(filepath.Join(dir, manifestName)); err != nil {
			return nil, fmt.Errorf("store/badger: cannot create a store: %w", db.space.noSpace(free))
		}
		db.readOnly.Store(true)
		db.space.low.Store(true)
		db.bo = bo.WithReadOnly(true)
		opts.Logger.Warn("store is low on disk space; opening read-only, writes are refused until space is freed",
			"dir", dir, "free_bytes", free, "reserve_bytes", db.space.reserve)
	}
	bdb, err := bdg.OpenManaged(db.bo)
	// Badger wraps its errors as text (y.Wrapf), hence the match on it.
	if err != nil && db.readOnly.Load() && strings.Contains(err.Error(), bdg.ErrTruncateNeeded.Error()) {
		// Badger read-only cannot replay a log that was not closed
		// cleanly, and writable it would flush it through maps of sparse
		// files: on this disk, SIGBUS.
		return nil, fmt.Errorf("store/badger: %s has %s free, less than the %s kept in reserve, and the store's log "+
			"was not closed cleanly: it must be replayed and flushed, which needs space; free space on that filesystem "+
			"and start again: %w", dir, formatBytes(db.space.free.Load()), formatBytes(db.space.reserve), store.ErrNoSpace)
	}
	if err != nil {
		// Badger's errors name the file but not what to do.
		return nil, fmt.Errorf("store/badger: open %s: %w; if a file there is damaged or truncated, "+
			"restore the data directory from a backup, or move it aside to start with an empty store", dir, err)
	}
	db.bdb = bdb
	rev, compacted, err := db.recover()
	if err == nil && rev == 0 {
		if db.readOnly.Load() {
			err = db.space.noSpace(db.space.free.Load())
		} else {
			// A new store starts at revision 1, so that no read ever reports
			// revision 0, which Watch takes as "now".
			rev, err = 1, db.applyIndex(nil, 1)
		}
	}
	if err != nil {
		_ = bdb.Close()
		return nil, err
	}
	db.committed.Store(rev)
	db.pins.init(compacted)
	db.physical = compacted
	if compacted > 0 {
		bdb.SetDiscardTs(uint64(compacted))
	}
	db.hub = newHub(opts.EventRing, opts.EventRingBytes, rev)
	db.log.Info("store opened", "dir", dir, "rev", rev, "compacted", compacted, "read_only", db.readOnly.Load())

	db.queue.cond.L = &db.queue.mu
	db.loops.Add(1)
	go db.notifyLoop()
	if opts.CompactionInterval > 0 {
		db.loops.Add(1)
		go db.compactLoop()
	}
	if opts.ValueLogGCInterval > 0 {
		db.loops.Add(1)
		go db.valueLogGCLoop()
	}
	if opts.ScrubInterval > 0 {
		db.loops.Add(1)
		go db.scrubLoop()
	}
	if db.readOnly.Load() {
		db.loops.Add(1)
		go db.spaceLoop()
	}
	opened = true
	return db, nil
}

// badgerOptions are the Badger options of a store in dir.
func badgerOptions(dir string, opts Options) bdg.Options {
	bo := bdg.DefaultOptions(dir).
		WithSyncWrites(true).
		WithNumVersionsToKeep(1).
		WithDetectConflicts(false).
		WithMemTableSize(opts.MemTableSize).
		WithBlockCacheSize(opts.BlockCacheSize).
		// Documents up to the threshold live in the LSM tree and its WAL;
		// Badger needs it below its batch size, 15% of a memtable.
		WithValueThreshold(min(1<<20, opts.MemTableSize/10)).
		// Every block read from a table file is checked against its
		// checksum, and every value read from the value log against its
		// CRC, so damage gives an error rather than wrong data. Whole tables
		// are checked by verifyTables before Open, not by Badger
		// (OnTableRead): see there.
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).
		WithLogger(badgerLogger{opts.Logger})
	if opts.noReadChecksums {
		bo = bo.WithChecksumVerificationMode(options.NoVerification).WithVerifyValueChecksum(false)
	}
	return bo
}

// recover finds the last revision and the compacted revision, and re-applies
// the newest history record to the object index, repairing a crash between
// the two requests of a group commit.
func (db *DB) recover() (rev, compacted int64, err error) {
	txn := db.bdb.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	readMeta := func(k []byte) (int64, error) {
		item, err := txn.Get(k)
		if errors.Is(err, bdg.ErrKeyNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return 0, err
		}
		return decodeRev(v)
	}
	if rev, err = readMeta(metaRevKey); err != nil {
		return 0, 0, db.readFailed(fmt.Errorf("recover: %w", err))
	}
	if compacted, err = readMeta(metaCompact); err != nil {
		return 0, 0, db.readFailed(fmt.Errorf("recover: %w", err))
	}
	rev = max(rev, compacted)

	it := txn.NewIterator(bdg.IteratorOptions{Reverse: true, Prefix: historyPrefix})
	defer it.Close()
	it.Seek(historyKey(math.MaxInt64))
	if !it.Valid() {
		return rev, compacted, nil
	}
	last, ok := historyKeyRev(it.Item().Key())
	if !ok {
		return 0, 0, fmt.Errorf("store/badger: recover: bad history key %x", it.Item().Key())
	}
	rec, err := it.Item().ValueCopy(nil)
	if err != nil {
		return 0, 0, db.readFailed(fmt.Errorf("recover: %w", err))
	}
	evs, err := decodeRecord(rec, last)
	if err != nil {
		return 0, 0, db.readFailed(fmt.Errorf("recover record %d: %w", last, err))
	}
	if last <= rev {
		// The last revision is written after the group's index entries, so
		// the group is whole: nothing to write (a store opened read-only,
		// for want of space, must not write).
		return rev, compacted, nil
	}
	db.opts.Logger.Info("store re-applying last history record", "rev", last, "events", len(evs))
	if db.readOnly.Load() {
		return 0, 0, fmt.Errorf("store/badger: the last write group (revision %d) must be completed, and the disk is too full to write it: %w",
			last, db.space.noSpace(db.space.free.Load()))
	}
	if err := db.applyIndex(evs, last); err != nil {
		return 0, 0, fmt.Errorf("store/badger: recover: %w", err)
	}
	return max(rev, last), compacted, nil
}

// applyIndex writes the object index entries of one group, then the last
// revision, synced. It is idempotent: recovery re-applies the newest group.
func (db *DB) applyIndex(evs []recordEvent, last int64) error {
	return db.writeGroup(nil, evs, last)
}

// writeGroup writes a group in one ordered, synced Badger request: the
// history record (when not nil) first, then the index entries, then the last
// revision. Badger's KVLoader keeps the entries in order in the write-ahead
// log (a transaction or WriteBatch would not: they hold writes in a map), and
// recovery replays a prefix of that log, so an index entry is never on disk
// without its record. A group too large for one request is split into several,
// still in order.
func (db *DB) writeGroup(record []byte, evs []recordEvent, last int64) error {
	db.lock.waitWritable()
	if sameVersion(evs, last) {
		err := db.writeGroupTxn(record, evs, last)
		if !errors.Is(err, bdg.ErrTxnTooBig) {
			return err
		}
	}
	l := db.bdb.NewKVLoader(1)
	if record != nil {
		if err := l.Set(&pb.KV{Key: historyKey(last), Value: record, Version: uint64(last)}); err != nil {
			return fmt.Errorf("history %d: %w", last, err)
		}
	}
	for i := range evs {
		ev := &evs[i]
		kv := &pb.KV{Key: objectKey(ev.key), Version: uint64(ev.rev)}
		if ev.typ == store.Deleted {
			// Badger's own backup format marks a delete this way.
			kv.Meta = []byte{badgerDeleteBit}
		} else {
			kv.Value = encodeObject(ev.createRev, ev.value)
		}
		if err := l.Set(kv); err != nil {
			return fmt.Errorf("index %d: %w", ev.rev, err)
		}
	}
	if err := l.Set(&pb.KV{Key: metaRevKey, Value: encodeRev(last), Version: uint64(last)}); err != nil {
		return fmt.Errorf("meta %d: %w", last, err)
	}
	if err := l.Finish(); err != nil {
		return fmt.Errorf("group %d: %w", last, err)
	}
	return nil
}

// sameVersion reports whether every entry of a group has the group's last
// revision as its version: a group of one write.
func sameVersion(evs []recordEvent, last int64) bool {
	for i := range evs {
		if evs[i].rev != last {
			return false
		}
	}
	return true
}

// writeGroupTxn writes a group whose entries all have version last as one
// Badger transaction committed at last. Badger marks a transaction's entries
// in its write-ahead log and replays them only whole, so the record, the
// index entries and the revision reach the store together or not at all,
// whatever order Badger writes them in. A KVLoader gives the same guarantee
// through order, but allocates two entry slices sized from the memtable per
// group; a group of one write, the usual case when writers come one at a
// time, is cheaper this way. Entries of different versions cannot share a
// transaction (Badger drops its markers then), hence the KVLoader for
// larger groups.
func (db *DB) writeGroupTxn(record []byte, evs []recordEvent, last int64) error {
	txn := db.bdb.NewTransactionAt(uint64(last), true)
	defer txn.Discard()
	if record != nil {
		if err := txn.SetEntry(bdg.NewEntry(historyKey(last), record)); err != nil {
			return fmt.Errorf("history %d: %w", last, err)
		}
	}
	for i := range evs {
		ev := &evs[i]
		var err error
		if ev.typ == store.Deleted {
			err = txn.Delete(objectKey(ev.key))
		} else {
			err = txn.SetEntry(bdg.NewEntry(objectKey(ev.key), encodeObject(ev.createRev, ev.value)))
		}
		if err != nil {
			return fmt.Errorf("index %d: %w", ev.rev, err)
		}
	}
	if err := txn.SetEntry(bdg.NewEntry(metaRevKey, encodeRev(last))); err != nil {
		return fmt.Errorf("meta %d: %w", last, err)
	}
	if err := txn.CommitAt(uint64(last), nil); err != nil {
		return fmt.Errorf("group %d: %w", last, err)
	}
	return nil
}

// badgerDeleteBit is the pb.KV meta byte of a deleted key in Badger's backup
// format, which KVLoader reads.
const badgerDeleteBit = 1

// CurrentRevision returns the revision of the last committed write.
func (db *DB) CurrentRevision(ctx context.Context) (int64, error) {
	if db.closed.Load() {
		return 0, store.ErrClosed
	}
	return db.committed.Load(), nil
}

// Close stops the store's goroutines, ends every watcher with store.ErrClosed,
// and closes Badger. It is idempotent.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.closed.Store(true)
		close(db.closing)
		db.stopWrites()
		close(db.notifyCh)
		db.loops.Wait()
		db.hub.closeAll(store.ErrClosed)
		db.watchers.Wait()
		db.closeMu.Lock()
		defer db.closeMu.Unlock()
		// Badger's Close flushes the memtable: room for one is enough.
		if ok, free := db.space.check(db, 0); !ok && !db.readOnly.Load() && free < 2*db.opts.MemTableSize {
			// It writes the new table through a map of a sparse file: on a
			// full disk, SIGBUS. The memtable's log is synced, and the next
			// Open replays it.
			db.log.Warn("store is low on disk space; leaving Badger open rather than flushing its memtable at close",
				"free_bytes", free, "reserve_bytes", db.space.reserve)
			db.lock.release()
			return
		}
		if !db.readOnly.Load() {
			// The flush writes its table through a memory map: while the
			// disk takes no writes, wait here in a system call rather than
			// in a page fault, where a garbage collection would wait for
			// it with every goroutine stopped, the server's shutdown bound
			// (cmd/setpoint closeStore) included.
			db.lock.waitWritable()
		}
		if err := db.bdb.Close(); err != nil {
			db.closeErr = fmt.Errorf("store/badger: close: %w", err)
		}
		db.lock.release()
		db.log.Info("store closed", "rev", db.committed.Load())
	})
	return db.closeErr
}

// enter guards an operation that touches Badger against a concurrent Close.
// The caller must call db.closeMu.RUnlock when enter returns nil.
func (db *DB) enter() error {
	db.closeMu.RLock()
	if db.closed.Load() {
		db.closeMu.RUnlock()
		return store.ErrClosed
	}
	return nil
}

// badgerLogger sends Badger's logs to slog. A message is formatted only
// when the logger takes its level: Badger logs at debug level on every
// write, and formatting those cost about 1% of a converge's CPU.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) logf(level slog.Level, f string, a []any) {
	ctx := context.Background()
	if b.l.Enabled(ctx, level) {
		b.l.Log(ctx, level, "badger", "detail", fmt.Sprintf(f, a...))
	}
}

func (b badgerLogger) Errorf(f string, a ...any)   { b.logf(slog.LevelError, f, a) }
func (b badgerLogger) Warningf(f string, a ...any) { b.logf(slog.LevelWarn, f, a) }
func (b badgerLogger) Infof(f string, a ...any)    { b.logf(slog.LevelDebug, f, a) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.logf(slog.LevelDebug, f, a) }

// removeEmptyValueLogs deletes value log files of zero bytes in dir. A
// process killed just after Badger created its next value log, before it
// wrote the file's header, leaves such a file; Badger then refuses to open
// the directory ("Open existing file: ...vlog: Create a new file"), although
// the file holds nothing. Deleting it loses nothing: no value was written to
// it, so nothing points into it, and Badger creates the file again.
func removeEmptyValueLogs(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("store/badger: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".vlog") {
			continue
		}
		info, err := e.Info()
		if err != nil || info.Size() != 0 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("store/badger: remove the empty value log %s: %w", path, err)
		}
		log.Warn("store removed an empty value log left by a crash", "file", path)
	}
	return nil
}
