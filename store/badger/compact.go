package badger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/setpoint-dev/setpoint/store"
)

// pins tracks the past revisions being read, so that compaction never
// physically removes what a running read or watch replay still needs. The
// logical compacted revision moves at once (new reads below it fail); the
// physical one waits for the pins below it.
type pins struct {
	mu        sync.Mutex
	compacted int64
	count     map[int64]int
}

func (p *pins) init(compacted int64) {
	p.compacted = compacted
	p.count = make(map[int64]int)
}

// pin registers a read at rev, or fails with store.ErrCompacted.
func (p *pins) pin(rev int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rev < p.compacted {
		return fmt.Errorf("compacted at %d: %w", p.compacted, store.ErrCompacted)
	}
	p.count[rev]++
	return nil
}

func (p *pins) unpin(rev int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.count[rev]--; p.count[rev] <= 0 {
		delete(p.count, rev)
	}
}

// move moves a pin forward. It never fails: the pin at from already holds
// physical compaction below it.
func (p *pins) move(from, to int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.count[from]--; p.count[from] <= 0 {
		delete(p.count, from)
	}
	p.count[to]++
}

func (p *pins) compactedRev() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.compacted
}

// setCompacted moves the logical compacted revision to rev and returns the
// revision up to which history may physically go: the lower of rev and the
// oldest pin.
func (p *pins) setCompacted(rev int64) (physical int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.compacted = max(p.compacted, rev)
	physical = p.compacted
	for r := range p.count {
		physical = min(physical, r)
	}
	return physical
}

// Compact discards history up to revision.
func (db *DB) Compact(ctx context.Context, revision int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.closeMu.RUnlock()
	return db.compact(revision)
}

// compact needs the caller inside enter.
func (db *DB) compact(revision int64) error {
	if db.readOnly.Load() {
		// Badger is open read-only for want of space (space.go).
		return db.space.noSpace(db.space.free.Load())
	}
	db.compactMu.Lock()
	defer db.compactMu.Unlock()
	if cur := db.committed.Load(); revision > cur {
		return fmt.Errorf("store/badger: compact at %d, current %d: %w", revision, cur, store.ErrFutureRevision)
	}
	if revision > db.pins.compactedRev() {
		wb := db.bdb.NewManagedWriteBatch()
		defer wb.Cancel()
		if err := wb.SetEntryAt(bdg.NewEntry(metaCompact, encodeRev(revision)), uint64(revision)); err != nil {
			return fmt.Errorf("store/badger: compact: %w", err)
		}
		if err := wb.Flush(); err != nil {
			return fmt.Errorf("store/badger: compact: %w", err)
		}
	}
	physical := db.pins.setCompacted(revision)
	if physical <= db.physical {
		return nil
	}
	if err := db.dropHistory(physical); err != nil {
		return err
	}
	db.bdb.SetDiscardTs(uint64(physical))
	db.log.Debug("store compacted", "rev", revision, "physical", physical)
	db.physical = physical
	return nil
}

// dropHistory deletes the history records whose events are all at or below
// upto. The tombstones take version upto+1, above every record they delete.
func (db *DB) dropHistory(upto int64) error {
	txn := db.bdb.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	iopts := bdg.IteratorOptions{Prefix: historyPrefix}
	it := txn.NewIterator(iopts)
	defer it.Close()
	wb := db.bdb.NewManagedWriteBatch()
	defer wb.Cancel()
	for it.Seek(historyKey(db.physical + 1)); it.Valid(); it.Next() {
		last, ok := historyKeyRev(it.Item().Key())
		if !ok || last > upto {
			break
		}
		if err := wb.DeleteAt(historyKey(last), uint64(upto+1)); err != nil {
			return fmt.Errorf("store/badger: compact history: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("store/badger: compact history: %w", err)
	}
	return nil
}

// compactLoop is the background compactor goroutine. Every interval it
// samples the committed revision and compacts to the newest revision that is
// both older than the window and CompactionMinRevisions behind the current one.
func (db *DB) compactLoop() {
	defer db.loops.Done()
	t := time.NewTicker(db.opts.CompactionInterval)
	defer t.Stop()
	var s store.CompactSampler
	for {
		select {
		case <-db.closing:
			return
		case <-t.C:
		}
		target := s.Observe(db.opts.Now(), db.committed.Load(), db.opts.CompactionWindow, db.opts.CompactionMinRevisions)
		if db.readOnly.Load() {
			continue
		}
		if err := db.enter(); err != nil {
			return
		}
		// Also retries physical compaction held back by pins.
		if err := db.compact(max(target, db.pins.compactedRev())); err != nil {
			db.log.Error("background compaction failed", "rev", target, "err", err)
		}
		db.closeMu.RUnlock()
	}
}

// valueLogGCLoop is the value-log GC goroutine: every interval it rewrites
// value-log files while Badger finds ones worth rewriting.
func (db *DB) valueLogGCLoop() {
	defer db.loops.Done()
	t := time.NewTicker(db.opts.ValueLogGCInterval)
	defer t.Stop()
	for {
		select {
		case <-db.closing:
			return
		case <-t.C:
		}
		if db.readOnly.Load() {
			continue
		}
		if err := db.enter(); err != nil {
			return
		}
		db.lock.waitWritable()
		for i := 0; i < 16; i++ {
			err := db.bdb.RunValueLogGC(0.5)
			if err != nil {
				if !errors.Is(err, bdg.ErrNoRewrite) && !errors.Is(err, bdg.ErrRejected) {
					db.log.Warn("value log gc failed", "err", err)
				}
				break
			}
			if db.closed.Load() {
				break
			}
		}
		db.closeMu.RUnlock()
	}
}
