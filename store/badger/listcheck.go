package badger

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math"
	"os"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
)

// checkListed checks that no table holds a damaged block among the keys
// a list read: from lo to the end of prefix, or to below hi when hi is set.
// Badger's iterators end a table quietly at a block that fails its checksum
// (its level then goes on with the next table), so a list would come back
// short without an error. Each table whose key range meets the list's is
// read again on its own, keys only, over the same range: that read must
// reach the table's last key or the end of the range; one that ends before
// either stopped at a damaged block. It costs a second pass over the keys
// the list read, not over their values.
func (db *DB) checkListed(ctx context.Context, prefix, lo, hi []byte) error {
	if db.opts.noReadChecksums {
		return nil
	}
	bo := db.bdb.Opts()
	for _, ti := range db.bdb.Tables() {
		left, right := y.ParseKey(ti.Left), y.ParseKey(ti.Right)
		if bytes.Compare(right, lo) < 0 || bytes.Compare(left, prefix) > 0 && !bytes.HasPrefix(left, prefix) ||
			hi != nil && bytes.Compare(left, hi) >= 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		path := table.NewFilename(ti.ID, bo.Dir)
		if err := checkTableRange(path, bo.Compression, bo.BlockSize, prefix, lo, hi); err != nil {
			if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
				continue // compacted away meanwhile
			}
			return err
		}
	}
	return nil
}

// checkTableRange reads the keys of one table file from lo to the end of
// prefix (or below hi) and returns a DamageError when the read ends before
// the range or the table does.
func checkTableRange(path string, compression options.CompressionType, blockSize int, prefix, lo, hi []byte) error {
	return withTable(path, compression, blockSize, options.OnBlockRead, func(t *table.Table) error {
		return checkRange(path, t, prefix, lo, hi)
	})
}

// checkRange is checkTableRange on an open table.
func checkRange(path string, t *table.Table, prefix, lo, hi []byte) error {
	it := t.NewIterator(table.NOCACHE)
	defer it.Close()
	var last []byte
	for it.Seek(y.KeyWithTs(lo, math.MaxUint64)); it.Valid(); it.Next() {
		k := it.Key()
		uk := y.ParseKey(k)
		if !bytes.HasPrefix(uk, prefix) || hi != nil && bytes.Compare(uk, hi) >= 0 {
			return nil // the end of the range
		}
		last = append(last[:0], k...)
	}
	if bytes.Equal(last, t.Biggest()) {
		return nil // the end of the table
	}
	return &DamageError{File: path, Err: errors.New("a block fails its checksum or cannot be read; a list would have ended there")}
}
