package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
)

// randomModule returns n bytes that start like Wasm.
func randomModule(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	copy(b, "\x00asm\x01\x00\x00\x00")
	return b[:n]
}

// chunkKeys lists the chunk keys of digest.
func chunkKeys(t *testing.T, st store.Store, digest string) []string {
	t.Helper()
	keys, err := listKeys(context.Background(), st, chunkPrefix(digest))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// checkRoundTrip stores modules of several sizes in st and reads them back:
// every store value is at most one chunk, the manifest names the chunks,
// and List and Digests see the modules and no chunk.
func checkRoundTrip(t *testing.T, st store.Store) {
	ctx := context.Background()
	m := NewModules(st)
	sizes := []struct {
		name   string
		size   int
		chunks int
	}{
		{"small", 100, 1},
		{"exactly one chunk", moduleChunkSize, 1},
		{"one byte over", moduleChunkSize + 1, 2},
		{"several MiB", 3<<20 + 12345, 7},
	}
	var digests []string
	for i, tc := range sizes {
		t.Run(tc.name, func(t *testing.T) {
			wasm := randomModule(tc.size, uint64(i))
			d := digestOf(wasm)
			digests = append(digests, d)
			created, err := m.Put(ctx, d, wasm)
			if err != nil || !created {
				t.Fatalf("Put: created %v, %v", created, err)
			}
			if created, err := m.Put(ctx, d, wasm); err != nil || created {
				t.Fatalf("Put again: created %v, %v", created, err)
			}
			keys := chunkKeys(t, st, d)
			if len(keys) != tc.chunks {
				t.Fatalf("%d chunks, want %d: %v", len(keys), tc.chunks, keys)
			}
			for _, k := range keys {
				kv, err := st.Get(ctx, k, store.GetOptions{})
				if err != nil || len(kv.Value) > moduleChunkSize {
					t.Fatalf("chunk %s: %d bytes, %v", k, len(kv.Value), err)
				}
			}
			kv, err := st.Get(ctx, moduleKey(d), store.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var man moduleManifest
			if err := json.Unmarshal(kv.Value, &man); err != nil || man.Chunks != tc.chunks || man.Size != tc.size || man.Digest != d {
				t.Fatalf("manifest %s: %v", kv.Value, err)
			}
			got, err := m.Get(ctx, d)
			if err != nil || !bytes.Equal(got, wasm) {
				t.Fatalf("Get: %d bytes, %v; want %d", len(got), err, len(wasm))
			}
		})
	}
	listed, err := m.List(ctx)
	if err != nil || len(listed) != len(sizes) {
		t.Fatalf("List: %v, %v", listed, err)
	}
	for _, s := range listed {
		for i, d := range digests {
			if s.Digest == d && s.Size != sizes[i].size {
				t.Errorf("List: %s has size %d, want %d", d, s.Size, sizes[i].size)
			}
		}
	}
	if ds, err := m.Digests(ctx); err != nil || len(ds) != len(sizes) {
		t.Fatalf("Digests: %v, %v", ds, err)
	}
}

// TestModuleChunksBadger: modules round-trip through chunks on Badger.
func TestModuleChunksBadger(t *testing.T) { checkRoundTrip(t, openTestDB(t)) }

// TestModuleChunksEtcd: a module of several MiB is stored in and read back
// from an etcd with its default request limit (1.5 MiB), which refuses it
// whole.
func TestModuleChunksEtcd(t *testing.T) {
	e := etcdtest.Start(t, etcdtest.Options{})
	db, err := etcd.Open(etcd.Options{Endpoints: []string{e.Endpoint}, Prefix: "/chunks"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	whole := randomModule(2<<20, 9)
	if _, err := db.Create(context.Background(), "/whole", whole); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("a 2 MiB value on etcd's default limit: %v, want ErrTooLarge", err)
	}
	checkRoundTrip(t, db)
}

// TestModuleChunksCorrupt: a missing or altered chunk is an error naming
// the module, never served bytes.
func TestModuleChunksCorrupt(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	m := NewModules(db)
	tests := []struct {
		name  string
		spoil func(t *testing.T, d string)
		want  string
	}{
		{"missing chunk", func(t *testing.T, d string) {
			if _, _, err := db.Delete(ctx, chunkKey(d, 1), 0); err != nil {
				t.Fatal(err)
			}
		}, "chunk 1 of 3 is missing"},
		{"altered chunk", func(t *testing.T, d string) {
			kv, err := db.Get(ctx, chunkKey(d, 2), store.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			v := bytes.Clone(kv.Value)
			v[0] ^= 0xff
			if _, err := db.Update(ctx, chunkKey(d, 2), v, 0); err != nil {
				t.Fatal(err)
			}
		}, "the stored bytes have digest"},
		{"short chunk", func(t *testing.T, d string) {
			if _, err := db.Update(ctx, chunkKey(d, 0), []byte("x"), 0); err != nil {
				t.Fatal(err)
			}
		}, "the manifest says"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wasm := randomModule(2*moduleChunkSize+10, uint64(100+i))
			d := digestOf(wasm)
			if _, err := m.Put(ctx, d, wasm); err != nil {
				t.Fatal(err)
			}
			tc.spoil(t, d)
			got, err := m.Get(ctx, d)
			if !errors.Is(err, ErrModuleCorrupt) || got != nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), d) {
				t.Fatalf("Get: %d bytes, %v; want ErrModuleCorrupt saying %q", len(got), err, tc.want)
			}
			// A corrupt module can still be deleted, chunks and all.
			if _, err := m.remove(ctx, d, m.mark(d)); err != nil {
				t.Fatal(err)
			}
			if keys := chunkKeys(t, db, d); len(keys) != 0 {
				t.Fatalf("chunks left after delete: %v", keys)
			}
			if _, err := m.Get(ctx, d); !errors.Is(err, ErrModuleNotFound) {
				t.Fatalf("Get after delete: %v", err)
			}
		})
	}
}

// TestModuleStoredWhole: a module stored whole by an earlier version, in a
// Badger data directory, is read, listed, served and deleted by this one
// once migrated (MigrateModules), and bytes stored whole are still read.
func TestModuleStoredWhole(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wasm := randomModule(3<<20, 7)
	d := digestOf(wasm)
	old, err := badger.Open(dir, badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The earlier format: the bytes under the digest's key.
	if _, err := old.Create(ctx, "/setpoint.dev/modules/"+strings.TrimPrefix(d, "sha256:"), wasm); err != nil {
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
	if _, err := MigrateModules(ctx, db); err != nil {
		t.Fatal(err)
	}
	m := NewModules(db)
	if got, err := m.Get(ctx, d); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("Get: %d bytes, %v", len(got), err)
	}
	if stored, err := m.Touch(ctx, d); err != nil || !stored {
		t.Fatalf("Touch: %v, %v", stored, err)
	}
	if created, err := m.Put(ctx, d, wasm); err != nil || created {
		t.Fatalf("Put of a module stored whole: created %v, %v", created, err)
	}
	if l, err := m.List(ctx); err != nil || len(l) != 1 || l[0].Digest != d || l[0].Size != len(wasm) {
		t.Fatalf("List: %v, %v", l, err)
	}
	// Altered bytes stored whole are caught too.
	bad := bytes.Clone(wasm)
	bad[len(bad)-1] ^= 1
	if _, err := db.Update(ctx, moduleKey(d), bad, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, d); !errors.Is(err, ErrModuleCorrupt) {
		t.Fatalf("Get of altered whole bytes: %v", err)
	}
	if _, err := db.Update(ctx, moduleKey(d), wasm, 0); err != nil {
		t.Fatal(err)
	}
	// Deleting it and restoring it (as the GC does when it was adopted
	// meanwhile) stores it in chunks.
	r, err := m.remove(ctx, d, m.mark(d))
	if err != nil || r.size != len(wasm) {
		t.Fatalf("remove: %+v, %v", r, err)
	}
	if _, err := m.Get(ctx, d); !errors.Is(err, ErrModuleNotFound) {
		t.Fatalf("Get after remove: %v", err)
	}
	if err := m.restore(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Get(ctx, d); err != nil || !bytes.Equal(got, wasm) || len(chunkKeys(t, db, d)) != 6 {
		t.Fatalf("Get after restore: %d bytes, %v, chunks %v", len(got), err, chunkKeys(t, db, d))
	}
}

// TestModuleGCChunks: the GC deletes an unused module's chunks with it, and
// chunks no manifest names (a write cut short) once the grace period is
// over, but not those of an upload under way.
func TestModuleGCChunks(t *testing.T) {
	e := newGCEnv(t)
	ctx := context.Background()
	st := e.modules.st
	big := randomModule(3*moduleChunkSize, 1)
	d := digestOf(big)
	if _, err := e.modules.Put(ctx, d, big); err != nil {
		t.Fatal(err)
	}
	// A write cut short between its chunks and its manifest.
	orphan := randomModule(2*moduleChunkSize, 2)
	od := digestOf(orphan)
	for i := range 2 {
		if _, err := st.Create(ctx, chunkKey(od, i), orphan[i*moduleChunkSize:(i+1)*moduleChunkSize]); err != nil {
			t.Fatal(err)
		}
	}
	if ds, err := e.modules.Digests(ctx); err != nil || len(ds) != 1 || ds[0] != d {
		t.Fatalf("Digests lists chunks without a manifest: %v, %v", ds, err)
	}
	e.collect(t, e.m)
	if len(chunkKeys(t, st, od)) != 2 {
		t.Fatal("orphan chunks deleted before the grace period")
	}
	e.clock.Advance(11 * time.Minute)
	e.collect(t, e.m)
	if keys := chunkKeys(t, st, d); len(keys) != 0 {
		t.Fatalf("chunks of a deleted module left: %v", keys)
	}
	if keys := chunkKeys(t, st, od); len(keys) != 0 {
		t.Fatalf("orphan chunks left after the grace period: %v", keys)
	}
	if !strings.Contains(e.logs.String(), "orphan module chunks deleted") {
		t.Errorf("no log of the orphan deletion:\n%s", e.logs.String())
	}

	// Chunks of an upload under way (marked, manifest not yet written) are
	// kept: the upload restarts the grace period.
	if _, err := st.Create(ctx, chunkKey(od, 0), orphan[:moduleChunkSize]); err != nil {
		t.Fatal(err)
	}
	e.collect(t, e.m)
	e.clock.Advance(11 * time.Minute)
	e.modules.touch(od)
	e.collect(t, e.m)
	if len(chunkKeys(t, st, od)) != 1 {
		t.Fatal("chunks of an upload under way were deleted")
	}
	// Completing the upload makes them a module's.
	if created, err := e.modules.Put(ctx, od, orphan); err != nil || !created {
		t.Fatalf("Put: %v, %v", created, err)
	}
	if got, err := e.modules.Get(ctx, od); err != nil || !bytes.Equal(got, orphan) {
		t.Fatalf("Get: %v", err)
	}
}
