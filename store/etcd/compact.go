package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpoint-dev/setpoint/store"
)

// Compact compacts etcd's history up to revision. etcd's history is shared
// by every prefix. Compacting at or below the compacted revision is a no-op.
func (db *DB) Compact(ctx context.Context, revision int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	return db.compact(ctx, revision)
}

// compact needs the caller inside enter.
func (db *DB) compact(ctx context.Context, revision int64) error {
	ctx, cancel := db.reqCtx(ctx)
	defer cancel()
	// Physical: etcd answers once the compaction is applied, so that reads
	// below it fail right after.
	_, err := db.cli.Compact(ctx, revision, clientv3.WithCompactPhysical())
	switch {
	case err == nil:
		db.log.Debug("store compacted", "rev", revision)
		return nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return nil
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("store/etcd: compact at %d: %w", revision, store.ErrFutureRevision)
	}
	return db.mapErr(fmt.Sprintf("compact at %d", revision), err)
}

// compactLoop is the background compactor goroutine. Every interval it
// samples the current revision and compacts to the newest revision that is
// both older than the window and CompactionMinRevisions behind the current
// one. Several servers on one etcd each run it; compacting to where another
// already did is a no-op.
func (db *DB) compactLoop() {
	defer db.loops.Done()
	t := time.NewTicker(db.opts.CompactionInterval)
	defer t.Stop()
	var s store.CompactSampler
	var done int64
	for {
		select {
		case <-db.closing:
			return
		case <-t.C:
		}
		if err := db.enter(); err != nil {
			return
		}
		cur, err := db.currentRevision(context.Background())
		if err == nil {
			target := s.Observe(db.opts.Now(), cur, db.opts.CompactionWindow, db.opts.CompactionMinRevisions)
			if target > done {
				if err = db.compact(context.Background(), target); err == nil {
					done = target
				}
			}
		}
		db.leave()
		if err != nil && !errors.Is(err, store.ErrClosed) {
			db.log.Error("background compaction failed", "err", err)
		}
	}
}
