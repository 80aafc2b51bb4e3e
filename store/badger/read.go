package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	bdg "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"

	"github.com/setpoint-dev/setpoint/store"
)

// readAt resolves the revision of a read: 0 is the committed revision. A past
// revision is pinned against compaction until release is called.
func (db *DB) readAt(rev int64) (at int64, release func(), err error) {
	cur := db.committed.Load()
	switch {
	case rev < 0:
		return 0, nil, fmt.Errorf("store/badger: negative revision %d", rev)
	case rev == 0 || rev == cur:
		// Reads at or above the compacted revision need no pin; the committed
		// revision never is below it.
		return cur, func() {}, nil
	case rev > cur:
		return 0, nil, fmt.Errorf("store/badger: revision %d, current %d: %w", rev, cur, store.ErrFutureRevision)
	}
	if err := db.pins.pin(rev); err != nil {
		return 0, nil, fmt.Errorf("store/badger: revision %d: %w", rev, err)
	}
	return rev, func() { db.pins.unpin(rev) }, nil
}

// Get returns the document under key, at opts.Revision when it is not 0.
func (db *DB) Get(ctx context.Context, key string, opts store.GetOptions) (_ *store.KeyValue, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.closeMu.RUnlock()
	defer db.damagedOnPanic(&err, "get "+key)
	if err := db.sound(); err != nil {
		return nil, err
	}
	at, release, err := db.readAt(opts.Revision)
	if err != nil {
		return nil, err
	}
	defer release()
	kv, err := db.getAt(key, at)
	if err != nil {
		return nil, err
	}
	return kv, nil
}

// getAt reads key at revision at; the caller pins at.
func (db *DB) getAt(key string, at int64) (*store.KeyValue, error) {
	txn := db.bdb.NewTransactionAt(uint64(at), false)
	defer txn.Discard()
	item, err := txn.Get(objectKey(key))
	if errors.Is(err, bdg.ErrKeyNotFound) {
		return nil, fmt.Errorf("store/badger: get %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, db.readFailed(fmt.Errorf("get %q: %w", key, err))
	}
	kv, err := itemKeyValue(key, item)
	return kv, db.readFailed(err)
}

func itemKeyValue(key string, item *bdg.Item) (*store.KeyValue, error) {
	raw, err := item.ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", key, err)
	}
	c, v, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", key, err)
	}
	return &store.KeyValue{Key: key, Value: v, CreateRevision: c, ModRevision: int64(item.Version())}, nil
}

// List returns the documents under prefix in key order, one page at a time.
func (db *DB) List(ctx context.Context, prefix string, opts store.ListOptions) (_ *store.ListResult, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts.Limit < 0 {
		return nil, fmt.Errorf("store/badger: negative limit %d", opts.Limit)
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.closeMu.RUnlock()
	defer db.damagedOnPanic(&err, "list "+prefix)
	if err := db.sound(); err != nil {
		return nil, err
	}

	rev, start := opts.Revision, prefix
	if opts.Continue != "" {
		var err error
		if rev, start, err = store.DecodeContinue(opts.Continue, prefix); err != nil {
			return nil, err
		}
		if rev > db.committed.Load() {
			return nil, fmt.Errorf("store/badger: continue at revision %d: %w", rev, store.ErrInvalidContinue)
		}
	}
	at, release, err := db.readAt(rev)
	if err != nil {
		return nil, err
	}
	defer release()

	txn := db.bdb.NewTransactionAt(uint64(at), false)
	defer txn.Discard()
	iopts := bdg.DefaultIteratorOptions
	iopts.Prefix = objectPrefix(prefix)
	iopts.PrefetchValues = !opts.KeysOnly
	if opts.Limit > 0 && opts.Filter == nil && opts.Limit < int64(iopts.PrefetchSize) {
		iopts.PrefetchSize = int(opts.Limit) + 1
	}
	it := txn.NewIterator(iopts)
	defer it.Close()

	res := &store.ListResult{Revision: at}
	var stopAt []byte // where a page ended before the prefix did
	n := 0
	for it.Seek(objectKey(start)); it.Valid(); it.Next() {
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		item := it.Item()
		key := string(bytes.Clone(item.Key()[1:]))
		kv := &store.KeyValue{Key: key, ModRevision: int64(item.Version())}
		if !opts.KeysOnly {
			if kv, err = itemKeyValue(key, item); err != nil {
				return nil, db.readFailed(err)
			}
		}
		if opts.Filter != nil && !opts.Filter(key, kv.Value) {
			continue
		}
		if opts.Limit > 0 && int64(len(res.Items)) == opts.Limit {
			// One more match exists: the next page starts at it.
			res.Continue = store.EncodeContinue(at, key)
			stopAt = objectKey(key)
			break
		}
		res.Items = append(res.Items, *kv)
	}
	// Damage found meanwhile (by a scrub) may have cut the list short.
	if err := db.sound(); err != nil {
		return nil, err
	}
	if err := db.checkListed(ctx, iopts.Prefix, objectKey(start), stopAt); err != nil {
		return nil, db.readFailed(err)
	}
	return res, nil
}

// damagedOnPanic, deferred by a read, turns a panic in Badger's decoding of
// a damaged table (it reads a damaged block without checking every bound)
// into the DamageError the read returns, as withTable does for the table
// checks: one damaged file must not kill the server.
//
// The panic does not say which file Badger was reading, so the tables are
// checked to name it (the caller holds closeMu).
func (db *DB) damagedOnPanic(err *error, what string) {
	if p := recover(); p != nil {
		cause := fmt.Errorf("%s: unreadable: %v", what, p)
		if de := db.damagedTable(); de != nil {
			cause = &DamageError{File: de.File, Err: fmt.Errorf("%w (%v)", cause, de.Err)}
		}
		*err = db.readFailed(cause)
	}
}

// damagedTable returns the damage of the first table Badger has open whose
// blocks fail their checksums, or nil. The caller holds closeMu.
func (db *DB) damagedTable() *DamageError {
	bo := db.bdb.Opts()
	for _, ti := range db.bdb.Tables() {
		path := table.NewFilename(ti.ID, bo.Dir)
		var de *DamageError
		if err := verifyTable(path, bo.Compression, bo.BlockSize); errors.As(err, &de) {
			if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
				continue // compacted away meanwhile
			}
			return de
		}
	}
	return nil
}
