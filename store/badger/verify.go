package badger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	bdg "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/setpoint-dev/setpoint/store"
)

// DamageError is the error of a store that found damaged data: at Open, a
// table file that fails its checksums or cannot be read; later, a read that
// failed or a scrub that found a damaged table. It wraps store.ErrCorrupt.
type DamageError struct {
	// File is the damaged file, when known.
	File string
	// Err is what was wrong with it.
	Err error
}

func (e *DamageError) Error() string {
	what := "the store's data is damaged"
	if e.File != "" {
		what = "the store file " + e.File + " is damaged"
	}
	return fmt.Sprintf("store/badger: %s (%v); the server refuses to serve part of its data: "+
		"restore the data directory from a backup, or move it aside to start with an empty store", what, e.Err)
}

func (e *DamageError) Unwrap() []error { return []error{store.ErrCorrupt, e.Err} }

// manifestName is Badger's list of live table files.
const manifestName = "MANIFEST"

// verifyTables reads every table file the manifest in dir lists and checks
// the checksum of each of its blocks. Badger itself, opening a table whose
// index fails its checksum, logs it and goes on without the table; and its
// own whole-table check dereferences a nil block on a read error (a panic in
// one of its goroutines, which kills the process). So the store checks the
// tables first, in its own goroutine, before Badger opens them.
func verifyTables(dir string, bo bdg.Options) error {
	f, err := os.Open(filepath.Join(dir, manifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a new store
	}
	if err != nil {
		return fmt.Errorf("store/badger: %w", err)
	}
	defer f.Close()
	m, _, err := bdg.ReplayManifestFile(f, bo.ExternalMagicVersion, bo)
	if err != nil {
		return &DamageError{File: f.Name(), Err: err}
	}
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		path := table.NewFilename(id, dir)
		if _, err := os.Stat(path); err != nil {
			return &DamageError{File: path, Err: fmt.Errorf("listed in %s but unreadable: %w", manifestName, err)}
		}
		if err := verifyTable(path, m.Tables[id].Compression, bo.BlockSize); err != nil {
			return err
		}
	}
	return nil
}

// verifyTable checks the index and every block checksum of one table file.
func verifyTable(path string, compression options.CompressionType, blockSize int) error {
	return withTable(path, compression, blockSize, options.OnTableRead, func(*table.Table) error { return nil })
}

// withTable opens one table file read-only, with checksums checked as mode
// says, calls fn with it and closes it. Any failure to open or read it,
// including a panic in Badger's decoding, is a DamageError naming the file.
func withTable(path string, compression options.CompressionType, blockSize int, mode options.ChecksumVerificationMode, fn func(*table.Table) error) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, z.NewFile) {
			// An empty file: OpenMmapFile says it "created" it.
			_ = mf.Close(-1)
			return &DamageError{File: path, Err: errors.New("the file is empty")}
		}
		return &DamageError{File: path, Err: err}
	}
	closed := false
	defer func() {
		// Badger reads a damaged index or block without checking every
		// bound; a panic here is damage too.
		if p := recover(); p != nil {
			err = &DamageError{File: path, Err: fmt.Errorf("unreadable: %v", p)}
		}
		if !closed {
			_ = mf.Close(-1)
		}
	}()
	t, err := table.OpenTable(mf, table.Options{
		ReadOnly:    true,
		ChkMode:     mode,
		Compression: compression,
		BlockSize:   blockSize,
	})
	if err != nil {
		closed = true // OpenTable closed it
		return &DamageError{File: path, Err: err}
	}
	// Not t.DecrRef: at zero references it deletes the file.
	closed = true
	defer func() { _ = t.MmapFile.Close(-1) }()
	return fn(t)
}

// scrub checks the blocks of every table Badger has open. Badger's
// iterators end quietly at a block that fails its checksum, as if the range
// were exhausted, so a table damaged after Open would make a list short
// without an error; a scrub finds it, and the caller marks the store damaged.
func (db *DB) scrub() error {
	if err := db.enter(); err != nil {
		return err
	}
	infos := db.bdb.Tables()
	bo := db.bdb.Opts()
	db.closeMu.RUnlock()
	for _, ti := range infos {
		if db.closed.Load() {
			return store.ErrClosed
		}
		path := table.NewFilename(ti.ID, bo.Dir)
		if err := verifyTable(path, bo.Compression, bo.BlockSize); err != nil {
			if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
				continue // compacted away meanwhile
			}
			return err
		}
	}
	return nil
}
