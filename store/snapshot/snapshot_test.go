package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/snapshot"
)

func smallOptions() badger.Options {
	return badger.Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20, FreeSpaceReserve: -1}
}

func openStore(t *testing.T, dir string) *badger.DB {
	t.Helper()
	db, err := badger.Open(dir, smallOptions())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// listAll lists every key of st at rev.
func listAll(t *testing.T, st store.Store, rev int64) []store.KeyValue {
	t.Helper()
	var all []store.KeyValue
	opts := store.ListOptions{Revision: rev, Limit: 100}
	for {
		res, err := st.List(context.Background(), "/", opts)
		if err != nil {
			t.Fatalf("List at %d: %v", rev, err)
		}
		all = append(all, res.Items...)
		if res.Continue == "" {
			return all
		}
		opts.Continue = res.Continue
	}
}

// TestSaveUnderLoadRestore takes a snapshot while writers create, update
// and delete, restores it into a new store, and compares every key with a
// List of the source at the snapshot's revision.
func TestSaveUnderLoadRestore(t *testing.T) {
	ctx := context.Background()
	src := openStore(t, t.TempDir())
	for i := range 200 {
		key := store.ObjectKey("", "configmaps", "default", fmt.Sprintf("seed-%03d", i))
		if _, err := src.Create(ctx, key, []byte(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	secret := store.PrivatePrefix + "security/ca.key"
	if _, err := src.Create(ctx, secret, []byte("PRIVATE")); err != nil {
		t.Fatal(err)
	}

	// Bounded write load: 4 writers, each until the snapshot is done or
	// 2,000 writes.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := store.ObjectKey("", "configmaps", "default", fmt.Sprintf("seed-%03d", (w*50+i)%200))
				val := []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				var err error
				switch i % 3 {
				case 0:
					_, err = src.Update(ctx, key, val, 0)
				case 1:
					_, err = src.Create(ctx, store.ObjectKey("", "pods", "default", fmt.Sprintf("p-%d-%d", w, i)), val)
				case 2:
					_, _, err = src.Delete(ctx, store.ObjectKey("", "pods", "default", fmt.Sprintf("p-%d-%d", w, i-1)), 0)
				}
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					t.Errorf("write: %v", err)
					return
				}
				writes.Add(1)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	var buf bytes.Buffer
	hdr, err := snapshot.Save(ctx, src, &buf, snapshot.SaveOptions{PageSize: 17})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	cur, _ := src.CurrentRevision(ctx)
	t.Logf("snapshot at revision %d of %d keys, %d bytes; %d writes during the test, store now at %d",
		hdr.Revision, hdr.Keys, buf.Len(), writes.Load(), cur)

	if cur <= hdr.Revision {
		t.Fatalf("no write after the snapshot's revision %d: the test did not exercise concurrent writes", hdr.Revision)
	}
	var want []store.KeyValue
	for _, kv := range listAll(t, src, hdr.Revision) {
		if kv.Key != secret {
			want = append(want, kv)
		}
	}
	if int64(len(want)) != hdr.Keys {
		t.Fatalf("header says %d keys, the source had %d at revision %d", hdr.Keys, len(want), hdr.Revision)
	}

	// status: verify and checksum.
	vh, sum, err := snapshot.Verify(bytes.NewReader(buf.Bytes()))
	if err != nil || len(sum) != 64 || vh.Revision != hdr.Revision {
		t.Fatalf("Verify: %v, %q, rev %d", err, sum, vh.Revision)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	r, err := snapshot.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := badger.Restore(dir, smallOptions(), r.Header().Revision, r.Next); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	dst := openStore(t, dir)
	if rev, _ := dst.CurrentRevision(ctx); rev != hdr.Revision {
		t.Fatalf("restored store at revision %d, want %d", rev, hdr.Revision)
	}
	got := listAll(t, dst, 0)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("restored store differs from the source at revision %d (-want +got):\n%s", hdr.Revision, diff)
	}
	if got := listAll(t, dst, hdr.Revision); len(got) != len(want) {
		t.Fatalf("List at the snapshot revision: %d keys, want %d", len(got), len(want))
	}
	if _, err := dst.Get(ctx, secret, store.GetOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("secret key restored without --include-secrets: %v", err)
	}
	// History before the snapshot is gone: 410 at the API.
	if _, err := dst.Watch(ctx, "/", hdr.Revision-1); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("Watch from before the snapshot: %v, want ErrCompacted", err)
	}
	// A watch from the snapshot revision sees the next write, at the next revision.
	w, err := dst.Watch(ctx, "/", hdr.Revision)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev, err := dst.Create(ctx, store.ObjectKey("", "configmaps", "default", "after"), []byte(`{}`))
	if err != nil || rev != hdr.Revision+1 {
		t.Fatalf("Create after restore: rev %d, %v; want %d", rev, err, hdr.Revision+1)
	}
	select {
	case ev := <-w.Events():
		if ev.Object.ModRevision != rev {
			t.Fatalf("watch event at %d, want %d", ev.Object.ModRevision, rev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event after restore")
	}
}

func TestSaveIncludesSecretsWhenAsked(t *testing.T) {
	ctx := context.Background()
	src := openStore(t, t.TempDir())
	for _, k := range []string{store.PrivatePrefix + "security/token", store.PrivatePrefix + "crdreadschemas/x", "/core/namespaces/default"} {
		if _, err := src.Create(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		secrets bool
		want    int64
	}{{"without", false, 2}, {"with", true, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			hdr, err := snapshot.Save(ctx, src, &buf, snapshot.SaveOptions{Secrets: tc.secrets})
			if err != nil || hdr.Keys != tc.want {
				t.Fatalf("Save: %d keys, %v; want %d", hdr.Keys, err, tc.want)
			}
		})
	}
}

// TestVerifyDetectsDamage flips, cuts and extends a good file: every
// change must fail Verify with ErrCorrupt.
func TestVerifyDetectsDamage(t *testing.T) {
	ctx := context.Background()
	src := openStore(t, t.TempDir())
	for i := range 20 {
		if _, err := src.Create(ctx, fmt.Sprintf("/core/configmaps/default/c%d", i), []byte(`{"data":"xxxxxxxx"}`)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := snapshot.Save(ctx, src, &buf, snapshot.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"flipped byte in a value", mutate(func(b []byte) []byte { b[len(b)/2] ^= 0x20; return b })},
		{"flipped byte in the trailer", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b })},
		{"truncated", good[:len(good)-40]},
		{"no trailer", good[:len(good)-32]},
		{"extra byte", append(append([]byte(nil), good...), 0)},
		{"empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := snapshot.Verify(bytes.NewReader(tc.file))
			if !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("Verify: %v, want ErrCorrupt", err)
			}
		})
	}
	if _, _, err := snapshot.Verify(bytes.NewReader(good)); err != nil {
		t.Fatalf("Verify of the good file: %v", err)
	}
}

// TestIsSecret: among the server's private keys only those naming security
// material are secret; uploaded modules, their chunks and read-schema
// records are always in a snapshot, and no resource key is secret.
func TestIsSecret(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{store.PrivateKey("identity"), true},
		{store.PrivateKey("security/ca.key"), true},
		{store.PrivateKey("modules/0123abcd"), false},
		{store.PrivateKey("modulechunks/0123abcd/000000"), false},
		{store.PrivateKey("crdreadschemas/widgets.example.setpoint.dev"), false},
		{store.PrivateKey("identityx"), false},
		{store.ObjectKey("setpoint.dev", "identity", "", "x"), false},
	} {
		if got := snapshot.IsSecret(tc.key); got != tc.want {
			t.Errorf("IsSecret(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
}
