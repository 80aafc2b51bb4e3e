package badger_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// damageOptions flush to table files after a few hundred writes.
func damageOptions() badger.Options {
	return badger.Options{
		MemTableSize:       1 << 20,
		BlockCacheSize:     1 << 20,
		CompactionInterval: -1,
		ValueLogGCInterval: -1,
		ScrubInterval:      -1,
	}
}

const damageObjects = 3000

func damageKey(i int) string { return fmt.Sprintf("/widgets/default/w-%05d", i) }

// fillStore writes damageObjects documents of about 1 KiB and closes the
// store, which leaves them in table files. It returns the table files,
// largest first.
func fillStore(t *testing.T, dir string) []string {
	t.Helper()
	db, err := badger.Open(dir, damageOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Documents that do not compress: any changed byte of a block then
	// changes what the block decodes to.
	rnd := rand.New(rand.NewPCG(1, 2))
	values := make([][]byte, damageObjects)
	for i := range values {
		pad := make([]byte, 500)
		for j := range pad {
			pad[j] = byte(rnd.Uint32())
		}
		values[i] = []byte(`{"pad":"` + hex.EncodeToString(pad) + `"}`)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < damageObjects; i += 16 {
				if _, err := db.Create(ctx, damageKey(i), values[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table files after close")
	}
	size := func(p string) int64 { fi, _ := os.Stat(p); return fi.Size() }
	slices.SortFunc(tables, func(a, b string) int { return int(size(b) - size(a)) })
	return tables
}

// flipByte inverts one byte of path at the given fraction of its size.
func flipByte(t *testing.T, path string, at float64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	off := int64(float64(fi.Size()) * at)
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// assertDamage checks that err is a damage error naming file.
func assertDamage(t *testing.T, err error, file string) {
	t.Helper()
	if err == nil {
		t.Fatal("got no error; want the damage")
	}
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("error %v does not wrap store.ErrCorrupt", err)
	}
	var de *badger.DamageError
	if !errors.As(err, &de) {
		t.Fatalf("error %v is not a *DamageError", err)
	}
	if file != "" && de.File != file {
		t.Fatalf("damage names %q, want %q", de.File, file)
	}
	if msg := err.Error(); file != "" && !strings.Contains(msg, file) || !strings.Contains(msg, "restore the data directory") {
		t.Fatalf("message %q should name the file and say what to do", msg)
	}
}

// TestOpenRefusesDamagedTable damages a table file written by a flush in
// three ways and checks that Open refuses the store, naming the file,
// rather than opening it without the table's data (Badger's own behaviour
// for a table whose index checksum fails) or serving a part of it.
func TestOpenRefusesDamagedTable(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"flipped byte in a data block", func(t *testing.T, path string) { flipByte(t, path, 0.3) }},
		{"flipped byte in the index", func(t *testing.T, path string) { flipByte(t, path, 0.995) }},
		{"truncated", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"empty", func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tables := fillStore(t, dir)
			tt.damage(t, tables[0])
			db, err := badger.Open(dir, damageOptions())
			if err == nil {
				db.Close()
			}
			assertDamage(t, err, tables[0])
		})
	}
}

// TestOpenVerifiesSoundStore checks that verification passes a store that
// was only closed and reopened, with every document there.
func TestOpenVerifiesSoundStore(t *testing.T) {
	dir := t.TempDir()
	fillStore(t, dir)
	db, err := badger.Open(dir, damageOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.List(context.Background(), "/widgets/", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != damageObjects {
		t.Fatalf("listed %d documents, want %d", len(res.Items), damageObjects)
	}
	if err := db.Health(); err != nil {
		t.Fatalf("Health: %v", err)
	}
}

// TestScrubFindsDamageWhileOpen damages a table file under an open store
// (Badger's iterators would end quietly at the bad block) and checks that a
// scrub marks the store damaged: every read, write and watch then fails
// with the damage rather than answering from part of the data.
func TestScrubFindsDamageWhileOpen(t *testing.T) {
	dir := t.TempDir()
	tables := fillStore(t, dir)
	db, err := badger.Open(dir, damageOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := badger.Scrub(db); err != nil {
		t.Fatalf("scrub of a sound store: %v", err)
	}
	flipByte(t, tables[0], 0.3)
	assertDamage(t, badger.Scrub(db), tables[0])
	assertDamage(t, db.Health(), tables[0])
	if !db.Damaged() {
		t.Fatal("Damaged() is false")
	}
	_, err = db.List(ctx, "/widgets/", store.ListOptions{})
	assertDamage(t, err, tables[0])
	_, err = db.List(ctx, "/widgets/", store.ListOptions{Limit: 10})
	assertDamage(t, err, tables[0])
	_, err = db.Get(ctx, damageKey(1), store.GetOptions{})
	assertDamage(t, err, tables[0])
	_, err = db.Create(ctx, "/widgets/default/new", []byte(`{}`))
	assertDamage(t, err, tables[0])
	_, err = db.Watch(ctx, "/widgets/", 0)
	assertDamage(t, err, tables[0])
}

// TestDamagedValueLog damages a document kept in the value log (larger than
// the value threshold) and checks that reading it fails with the damage and
// marks the store damaged, rather than returning other bytes.
func TestDamagedValueLog(t *testing.T) {
	dir := t.TempDir()
	opts := damageOptions()
	db, err := badger.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	big := []byte(`{"pad":"` + strings.Repeat("y", 300<<10) + `"}`)
	for i := range 3 {
		if _, err := db.Create(ctx, damageKey(i), big); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	var damaged string
	for _, p := range logs {
		if fi, _ := os.Stat(p); fi.Size() > 600<<10 {
			damaged = p
		}
	}
	if damaged == "" {
		t.Fatalf("no value log holds the documents: %v", logs)
	}
	// Inside the first document's value (the file starts with a 20-byte header).
	flipByte(t, damaged, 0.1)
	db, err = badger.Open(dir, opts)
	if err != nil {
		assertDamage(t, err, "")
		return
	}
	defer db.Close()
	_, err = db.Get(ctx, damageKey(0), store.GetOptions{})
	assertDamage(t, err, "")
	_, err = db.List(ctx, "/widgets/", store.ListOptions{})
	assertDamage(t, err, "")
	if db.Health() == nil {
		t.Fatal("Health is nil after a damaged read")
	}
}

// TestSecondOpenRefused opens a directory twice: the second Open must fail
// with ErrLocked and a message saying what to do, and succeed once the first
// store is closed.
func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(dir, damageOptions())
	if err != nil {
		t.Fatal(err)
	}
	db2, err := badger.Open(dir, damageOptions())
	if err == nil {
		db2.Close()
		t.Fatal("second Open succeeded")
	}
	if !errors.Is(err, badger.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) ||
		!strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("second Open: %v; want ErrLocked naming the holder and what to do", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err = badger.Open(dir, damageOptions())
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	db2.Close()
}

// TestOpenDamagedBadgerFiles damages the files Badger itself reads at open
// (the manifest, the key registry): Open must fail with a message that says
// what to do, not panic.
func TestOpenDamagedBadgerFiles(t *testing.T) {
	tests := []struct {
		name, file string
		damage     func(t *testing.T, path string)
	}{
		{"manifest byte", "MANIFEST", func(t *testing.T, p string) { flipByte(t, p, 0.5) }},
		{"manifest empty", "MANIFEST", func(t *testing.T, p string) { _ = os.Truncate(p, 0) }},
		{"key registry empty", "KEYREGISTRY", func(t *testing.T, p string) { _ = os.Truncate(p, 0) }},
	}
	dir := t.TempDir()
	fillStore(t, dir)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			copyDir := t.TempDir()
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(copyDir, e.Name()), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			tt.damage(t, filepath.Join(copyDir, tt.file))
			db, err := badger.Open(copyDir, damageOptions())
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), "restore the data directory from a backup") {
				t.Fatalf("Open: %v; want what to do", err)
			}
		})
	}
}

// damageUntilListFails flips one byte of table at a series of places, the
// store open, until list fails; a list that comes back short without an
// error fails the test. A place outside the listed keys (the store's history
// shares the tables) leaves the list whole, and the byte is put back.
func damageUntilListFails(t *testing.T, db *badger.DB, tables []string, list func() (int, error)) (string, error) {
	t.Helper()
	for _, table := range tables {
		if file, err := damageTableUntilListFails(t, table, list); err != nil {
			return file, err
		}
	}
	t.Fatal("no damaged byte made the list fail")
	return "", nil
}

func damageTableUntilListFails(t *testing.T, table string, list func() (int, error)) (string, error) {
	t.Helper()
	for at := 0.02; at < 0.98; at += 0.04 {
		if _, err := os.Stat(table); err != nil {
			return "", nil // compacted away: Badger compacts level 0 by itself
		}
		flipByte(t, table, at)
		start := time.Now()
		n, err := list()
		took := time.Since(start)
		if err != nil {
			t.Logf("byte at %.0f%% of %s damaged: the list failed after %d items in %s: %v", at*100, filepath.Base(table), n, took.Round(time.Millisecond), err)
			return table, err
		}
		if n != damageObjects {
			t.Fatalf("byte at %.0f%% damaged: the list gave %d of %d items and no error", at*100, n, damageObjects)
		}
		if _, err := os.Stat(table); err != nil {
			return "", nil
		}
		flipByte(t, table, at)
	}
	return "", nil
}

// settledTables waits until Badger's own compaction of level 0 after Open
// has finished (the table files stay the same for a second) and returns
// them: a compaction that read a damaged block would drop its keys quietly,
// which no list can tell (docs/RATIONALE.md).
func settledTables(t *testing.T, dir string) []string {
	t.Helper()
	var last []string
	stable := time.Now()
	testsupport.Poll(t, 20*time.Second, "the table files to stay the same for a second", func() (bool, string) {
		now, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
		if !slices.Equal(now, last) {
			last, stable = now, time.Now()
			return false, fmt.Sprint("still changing: ", now)
		}
		return time.Since(stable) >= time.Second, ""
	})
	return last
}

// TestListFindsDamageWithoutScrub damages a table file under an open store
// with no scrub running and checks that a list over the damaged block fails
// with the damage, a full list and a page alike, instead of coming back
// short, and marks the store damaged.
func TestListFindsDamageWithoutScrub(t *testing.T) {
	for _, page := range []int64{0, 100} {
		t.Run(fmt.Sprintf("limit %d", page), func(t *testing.T) {
			dir := t.TempDir()
			tables := fillStore(t, dir)
			db, err := badger.Open(dir, damageOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			tables = settledTables(t, dir)
			file, err := damageUntilListFails(t, db, tables, func() (int, error) {
				n, opts := 0, store.ListOptions{Limit: page}
				for {
					res, err := db.List(ctx, "/widgets/", opts)
					if err != nil {
						return n, err
					}
					n += len(res.Items)
					if res.Continue == "" {
						return n, nil
					}
					opts.Continue = res.Continue
				}
			})
			assertDamage(t, err, file)
			if !db.Damaged() {
				t.Fatal("Damaged() is false after the failed list")
			}
		})
	}
}
