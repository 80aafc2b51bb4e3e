package badger

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/setpoint-dev/setpoint/store"
)

// Badger writes its write-ahead log, value log and new tables through memory
// maps of files it extends with ftruncate, which allocates no disk blocks: a
// page first written when the filesystem is full has nowhere to go, and the
// kernel answers the write with SIGBUS, which kills the process (a Go
// program cannot recover from a fault in another library's goroutine). On
// restart, Badger flushes the memtables it replayed, through the same maps,
// and dies again: a crash loop. So the store keeps a reserve of free space
// that Badger's maps may need (a memtable, a flush, a compaction) and stops
// taking writes before the disk gets there:
//
//   - each commit group checks the free space first (one statfs, about a
//     microsecond) and, below the reserve, refuses the group's writes with
//     store.ErrNoSpace; reads and watches go on, and writes resume by
//     themselves once space is freed;
//   - Open, below the reserve, opens Badger read-only (no memtable, no
//     flush, no compaction: nothing is written) and the space loop reopens it
//     writable once space is back.

// spaceGuard watches the free space of the store's filesystem.
type spaceGuard struct {
	dir     string
	reserve int64 // bytes; 0 disables the guard
	free    atomic.Int64
	low     atomic.Bool
}

// check reads the free space and reports whether need more bytes still
// leave the reserve free. It logs when the state changes.
func (s *spaceGuard) check(db *DB, need int64) (ok bool, free int64) {
	if s.reserve <= 0 {
		return true, -1
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &st); err != nil {
		// Cannot tell: let Badger try (it reports write errors itself).
		return true, -1
	}
	free = int64(st.Bavail) * int64(st.Bsize)
	s.free.Store(free)
	ok = free-need >= s.reserve
	if s.low.CompareAndSwap(ok, !ok) && db != nil {
		if ok {
			db.log.Info("store has free space again; writes resume", "dir", s.dir, "free_bytes", free, "reserve_bytes", s.reserve)
		} else {
			db.log.Warn("store is low on disk space; refusing writes until space is freed",
				"dir", s.dir, "free_bytes", free, "reserve_bytes", s.reserve)
		}
	}
	return ok, free
}

// noSpace is the error of a write refused for want of space.
func (s *spaceGuard) noSpace(free int64) error {
	return fmt.Errorf("store/badger: %s has %s free, less than the %s kept in reserve; "+
		"writes are refused until space is freed (reads and watches go on): %w",
		s.dir, formatBytes(free), formatBytes(s.reserve), store.ErrNoSpace)
}

func formatBytes(n int64) string {
	switch {
	case n < 0:
		return "an unknown amount"
	case n >= 10<<30:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// FreeSpace reads the free bytes on the store's filesystem (-1 with no
// reserve) and reports whether writes are refused for want of space (metrics).
func (db *DB) FreeSpace() (free int64, low bool) {
	if db.space.reserve <= 0 {
		return -1, false
	}
	ok, free := db.space.check(db, 0)
	return free, !ok || db.readOnly.Load()
}

// checkWriteSpace refuses a group of size bytes when the disk is low.
func (db *DB) checkWriteSpace(size int64) error {
	free := int64(-1)
	if db.readOnly.Load() {
		free = db.space.free.Load()
	} else {
		var ok bool
		if ok, free = db.space.check(db, size); ok {
			return nil
		}
	}
	return db.space.noSpace(free)
}

// spaceLoop is the goroutine that, while the store is open read-only for
// want of space, checks the space every SpaceCheckInterval and reopens
// Badger writable once it is back.
func (db *DB) spaceLoop() {
	defer db.loops.Done()
	t := time.NewTicker(db.opts.SpaceCheckInterval)
	defer t.Stop()
	for db.readOnly.Load() {
		select {
		case <-db.closing:
			return
		case <-t.C:
		}
		if ok, _ := db.space.check(db, 0); !ok {
			continue
		}
		if err := db.reopenWritable(); err != nil {
			db.log.Error("store could not reopen writable; still read-only", "err", err)
		}
	}
}

// reopenWritable swaps the read-only Badger for a writable one. It holds
// closeMu exclusively, so no read, write group or background loop uses
// Badger meanwhile.
func (db *DB) reopenWritable() error {
	db.closeMu.Lock()
	defer db.closeMu.Unlock()
	if db.closed.Load() || !db.readOnly.Load() {
		return nil
	}
	if err := db.bdb.Close(); err != nil {
		return fmt.Errorf("store/badger: close read-only: %w", err)
	}
	bo := db.bo.WithReadOnly(false)
	bdb, err := bdg.OpenManaged(bo)
	if err != nil {
		// Serve reads again as before.
		if bdb, rerr := bdg.OpenManaged(db.bo); rerr == nil {
			db.bdb = bdb
			return fmt.Errorf("store/badger: reopen writable: %w", err)
		}
		ferr := fmt.Errorf("%w: reopen writable: %w", errFailed, err)
		db.failed.Store(&ferr)
		return ferr
	}
	db.bdb = bdb
	if p := db.physical; p > 0 {
		bdb.SetDiscardTs(uint64(p))
	}
	db.readOnly.Store(false)
	db.log.Info("store reopened writable")
	return nil
}
