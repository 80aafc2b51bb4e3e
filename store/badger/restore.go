package badger

import (
	"errors"
	"fmt"
	"io"
	"os"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/setpoint-dev/setpoint/store"
)

// Restore builds a new store in dir, which must not hold one, from the
// documents next returns (io.EOF after the last) as they were at revision
// rev: each is written at its own ModRevision with its CreateRevision, so
// reads at rev and later, and every resourceVersion, are as they were. The
// history before rev is not restored: the new store is compacted at rev,
// so a read or a watch from an older revision gets store.ErrCompacted (410
// at the API), as after compaction on the original server. A watch from rev
// or later works.
//
// On an error the caller should remove dir: a partly restored store is not
// marked as complete (the last revision is written last) but is not empty.
func Restore(dir string, opts Options, rev int64, next func() (*store.KeyValue, error)) error {
	if rev < 1 {
		return fmt.Errorf("store/badger: restore at revision %d", rev)
	}
	opts = opts.withDefaults()
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer lock.release()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != lockName {
			return fmt.Errorf("store/badger: restore into %s: the directory is not empty (%s)", dir, e.Name())
		}
	}
	bdb, err := bdg.OpenManaged(badgerOptions(dir, opts))
	if err != nil {
		return fmt.Errorf("store/badger: restore: open %s: %w", dir, err)
	}
	wb := bdb.NewManagedWriteBatch()
	werr := func() error {
		defer wb.Cancel()
		for {
			kv, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if kv.ModRevision < 1 || kv.ModRevision > rev || kv.CreateRevision < 1 || kv.CreateRevision > kv.ModRevision {
				return fmt.Errorf("store/badger: restore %s: revisions %d/%d outside 1..%d", kv.Key, kv.CreateRevision, kv.ModRevision, rev)
			}
			e := bdg.NewEntry(objectKey(kv.Key), encodeObject(kv.CreateRevision, kv.Value))
			if err := wb.SetEntryAt(e, uint64(kv.ModRevision)); err != nil {
				return fmt.Errorf("store/badger: restore %s: %w", kv.Key, err)
			}
		}
		if err := wb.Flush(); err != nil {
			return fmt.Errorf("store/badger: restore: %w", err)
		}
		// The revision last, and alone: a store without it is incomplete.
		meta := bdb.NewManagedWriteBatch()
		defer meta.Cancel()
		if err := meta.SetEntryAt(bdg.NewEntry(metaCompact, encodeRev(rev)), uint64(rev)); err != nil {
			return err
		}
		if err := meta.SetEntryAt(bdg.NewEntry(metaRevKey, encodeRev(rev)), uint64(rev)); err != nil {
			return err
		}
		return meta.Flush()
	}()
	if err := bdb.Close(); err != nil && werr == nil {
		werr = fmt.Errorf("store/badger: restore: close: %w", err)
	}
	return werr
}
