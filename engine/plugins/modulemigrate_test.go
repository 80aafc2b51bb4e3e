package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
)

// The keys servers of earlier versions stored modules under, spelled out
// here rather than taken from legacyModulesAt, so that the test pins them.
const (
	oldModules = "/setpoint.dev/modules/"
	oldChunks  = "/setpoint.dev/modulechunks/"
)

// writeOld stores wasm as a server of an earlier version did: in chunks
// under oldChunks, then its manifest under oldModules; or whole under
// oldModules when whole is set. It returns the module's digest.
func writeOld(t *testing.T, st store.Store, wasm []byte, whole bool) string {
	t.Helper()
	ctx := context.Background()
	d := digestOf(wasm)
	hex := strings.TrimPrefix(d, "sha256:")
	if whole {
		if _, err := st.Create(ctx, oldModules+hex, wasm); err != nil {
			t.Fatal(err)
		}
		return d
	}
	n := 0
	for off := 0; off < len(wasm); off += moduleChunkSize {
		if _, err := st.Create(ctx, fmt.Sprintf("%s%s/%06d", oldChunks, hex, n), wasm[off:min(off+moduleChunkSize, len(wasm))]); err != nil {
			t.Fatal(err)
		}
		n++
	}
	man, err := json.Marshal(map[string]any{"kind": "ModuleManifest", "digest": d, "size": len(wasm), "chunkSize": moduleChunkSize, "chunks": n})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(ctx, oldModules+hex, man); err != nil {
		t.Fatal(err)
	}
	return d
}

// oldKeys lists what is left under the old keys.
func oldKeys(t *testing.T, st store.Store) []string {
	t.Helper()
	var out []string
	for _, p := range []string{oldModules, oldChunks} {
		keys, err := listKeys(context.Background(), st, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, keys...)
	}
	return out
}

// checkModule fails t unless digest reads back as want at the current keys.
func checkModule(t *testing.T, st store.Store, digest string, want []byte) {
	t.Helper()
	got, err := NewModules(st).Get(context.Background(), digest)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("module %s after the migration: %d bytes, %v; want %d bytes", digest, len(got), err, len(want))
	}
}

// TestMigrateModules: a Badger data directory written by an earlier version
// (a chunked module, a module stored whole, a module whose chunk is lost,
// chunks an interrupted upload left) is migrated on opening: the modules
// read back from their current keys, the corrupt one is there as corrupt
// for the collector, nothing is left under the old keys, and a second run
// finds nothing to do.
func TestMigrateModules(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old, err := badger.Open(dir, badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	chunked := randomModule(3*moduleChunkSize+17, 1)
	whole := randomModule(2<<20, 2)
	lost := randomModule(2*moduleChunkSize+1, 3)
	dChunked := writeOld(t, old, chunked, false)
	dWhole := writeOld(t, old, whole, true)
	dLost := writeOld(t, old, lost, false)
	if _, _, err := old.Delete(ctx, fmt.Sprintf("%s%s/%06d", oldChunks, strings.TrimPrefix(dLost, "sha256:"), 1), 0); err != nil {
		t.Fatal(err)
	}
	orphan := digestOf([]byte("cut short"))
	if _, err := old.Create(ctx, oldChunks+strings.TrimPrefix(orphan, "sha256:")+"/000000", []byte("cut short")); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := badger.Open(dir, badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	n, err := MigrateModules(ctx, db)
	if err != nil || n != 3 {
		t.Fatalf("MigrateModules = %d, %v; want 3 modules moved", n, err)
	}
	if left := oldKeys(t, db); len(left) != 0 {
		t.Fatalf("left under the old keys: %v", left)
	}
	checkModule(t, db, dChunked, chunked)
	checkModule(t, db, dWhole, whole)
	if keys := chunkKeys(t, db, dWhole); len(keys) != 4 {
		t.Errorf("the module stored whole is in %d chunks, want 4", len(keys))
	}
	m := NewModules(db)
	if _, err := m.Get(ctx, dLost); !errors.Is(err, ErrModuleCorrupt) {
		t.Errorf("the module with a lost chunk: %v, want ErrModuleCorrupt", err)
	}
	l, err := m.List(ctx)
	if err != nil || len(l) != 3 {
		t.Fatalf("List = %v, %v; want the 3 modules", l, err)
	}
	if keys := chunkKeys(t, db, orphan); len(keys) != 0 {
		t.Errorf("orphan chunks were moved: %v", keys)
	}
	if n, err := MigrateModules(ctx, db); err != nil || n != 0 {
		t.Fatalf("second MigrateModules = %d, %v; want nothing to do", n, err)
	}
	checkModule(t, db, dChunked, chunked)
}

// failAfter is a store whose writes fail once it has let n through, as if
// the server stopped there.
type failAfter struct {
	store.Store
	n atomic.Int64
}

var errCrash = errors.New("crash")

func (f *failAfter) write() error {
	if f.n.Add(-1) < 0 {
		return errCrash
	}
	return nil
}

func (f *failAfter) Create(ctx context.Context, key string, value []byte) (int64, error) {
	if err := f.write(); err != nil {
		return 0, err
	}
	return f.Store.Create(ctx, key, value)
}

func (f *failAfter) Update(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	if err := f.write(); err != nil {
		return 0, err
	}
	return f.Store.Update(ctx, key, value, rev)
}

func (f *failAfter) Delete(ctx context.Context, key string, rev int64) (*store.KeyValue, int64, error) {
	if err := f.write(); err != nil {
		return nil, 0, err
	}
	return f.Store.Delete(ctx, key, rev)
}

// TestMigrateModulesCrash stops a migration after every write it makes in
// turn: at each stop the module reads back whole from its old or its new
// keys, and a migration run afterwards finishes the job.
func TestMigrateModulesCrash(t *testing.T) {
	ctx := context.Background()
	wasm := randomModule(3*moduleChunkSize, 4)
	for stop := 0; ; stop++ {
		db, err := badger.Open(t.TempDir(), badger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		d := writeOld(t, db, wasm, false)
		f := &failAfter{Store: db}
		f.n.Store(int64(stop))
		_, err = MigrateModules(ctx, f)
		if err != nil && !errors.Is(err, errCrash) {
			t.Fatalf("stop after %d writes: %v", stop, err)
		}
		_, errOld := readModuleAt(ctx, db, legacyModulesAt, d)
		_, errNew := readModuleAt(ctx, db, modulesAt, d)
		if errOld != nil && errNew != nil {
			t.Fatalf("stop after %d writes: the module is whole nowhere: old %v, new %v", stop, errOld, errNew)
		}
		if _, err := MigrateModules(ctx, db); err != nil {
			t.Fatalf("stop after %d writes: the next migration: %v", stop, err)
		}
		checkModule(t, db, d, wasm)
		if left := oldKeys(t, db); len(left) != 0 {
			t.Fatalf("stop after %d writes: left under the old keys: %v", stop, left)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if err == nil { // the migration ran to its end without stopping
			if stop < 8 { // 3 chunks and a manifest written, then deleted
				t.Fatalf("a migration of one module in 3 chunks made only %d writes", stop)
			}
			return
		}
	}
}

// migrateConcurrently has servers, one per client of one store given,
// migrate modules written by an earlier version at the same time: every
// module reads back and nothing is left under the old keys.
func migrateConcurrently(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	var mods [][]byte
	var digests []string
	for i := range 3 {
		wasm := randomModule((i+1)*moduleChunkSize-i, uint64(10+i))
		mods = append(mods, wasm)
		digests = append(digests, writeOld(t, stores[0], wasm, false))
	}
	small := randomModule(1000, 13) // under etcd's request limit, stored whole
	mods = append(mods, small)
	digests = append(digests, writeOld(t, stores[0], small, true))
	var wg sync.WaitGroup
	moved := make([]int, len(stores))
	for i, st := range stores {
		wg.Go(func() {
			n, err := MigrateModules(ctx, st)
			if err != nil {
				t.Errorf("server %d: %v", i, err)
			}
			moved[i] = n
		})
	}
	wg.Wait()
	total := 0
	for _, n := range moved {
		total += n
	}
	if total < len(mods) {
		t.Errorf("the servers moved %v modules, want %d at least in all", moved, len(mods))
	}
	for i, d := range digests {
		checkModule(t, stores[0], d, mods[i])
	}
	if left := oldKeys(t, stores[0]); len(left) != 0 {
		t.Fatalf("left under the old keys: %v", left)
	}
}

// TestMigrateModulesConcurrent: several servers migrating one Badger store
// at once.
func TestMigrateModulesConcurrent(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			db, err := badger.Open(t.TempDir(), badger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			migrateConcurrently(t, []store.Store{db, db, db})
		})
	}
}

// TestMigrateModulesEtcd: three servers, each with its own etcd client,
// migrating one etcd at once.
func TestMigrateModulesEtcd(t *testing.T) {
	e := etcdtest.Start(t, etcdtest.Options{})
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			var stores []store.Store
			for range 3 {
				db, err := etcd.Open(etcd.Options{Endpoints: []string{e.Endpoint}, Prefix: fmt.Sprintf("/migrate%d", round)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				stores = append(stores, db)
			}
			migrateConcurrently(t, stores)
		})
	}
}

// chunkPrefix is the prefix of digest's chunks where modules live.
func chunkPrefix(digest string) string { return modulesAt.chunkPrefix(digest) }

// chunkKey is the key of digest's chunk i where modules live.
func chunkKey(digest string, i int) string { return modulesAt.chunkKey(digest, i) }
