package badger_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/storetest"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

func spaceOptions() badger.Options {
	return badger.Options{
		MemTableSize:       4 << 20,
		BlockCacheSize:     1 << 20,
		CompactionInterval: -1,
		ValueLogGCInterval: -1,
		ScrubInterval:      -1,
		FreeSpaceReserve:   16 << 20,
		SpaceCheckInterval: 50 * time.Millisecond,
	}
}

// fillDisk writes a file in dir until the filesystem is full and returns
// its path; removing it frees the space again.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	buf = buf[:4096]
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	return path
}

func assertNoSpace(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("write: %v; want store.ErrNoSpace", err)
	}
	if !strings.Contains(err.Error(), "until space is freed") {
		t.Fatalf("message %q should say what to do", err)
	}
}

// TestDiskFullRefusesWrites fills the store's filesystem (a 64 MiB ext4 image)
// to the last byte under an open store: writes must fail with ErrNoSpace
// (Badger would otherwise write its log through a map of a sparse file, and
// die of SIGBUS), reads and a running watch go on, and writes resume without
// a reopen once the space is freed, with nothing acknowledged lost.
func TestDiskFullRefusesWrites(t *testing.T) {
	dir := storetest.MountSmallDisk(t, 64<<20)
	ctx := context.Background()
	db, err := badger.Open(filepath.Join(dir, "store"), spaceOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 100 {
		if _, err := db.Create(ctx, damageKey(i), []byte(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := db.Watch(ctx, "/widgets/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	filler := fillDisk(t, dir)
	_, err = db.Create(ctx, damageKey(100), []byte(`{"n":1}`))
	assertNoSpace(t, err)
	_, err = db.Update(ctx, damageKey(1), []byte(`{"n":2}`), 0)
	assertNoSpace(t, err)
	_, _, err = db.Delete(ctx, damageKey(2), 0)
	assertNoSpace(t, err)
	if free, low := db.FreeSpace(); !low || free > 16<<20 {
		t.Fatalf("FreeSpace = %d, %v; want low", free, low)
	}
	res, err := db.List(ctx, "/widgets/", store.ListOptions{})
	if err != nil || len(res.Items) != 100 {
		t.Fatalf("List on a full disk: %d items, %v; want 100", len(res.Items), err)
	}
	if _, err := db.Get(ctx, damageKey(1), store.GetOptions{}); err != nil {
		t.Fatalf("Get on a full disk: %v", err)
	}
	if db.Health() != nil {
		t.Fatalf("Health on a full disk: %v; a full disk is not damage", db.Health())
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	rev, err := db.Create(ctx, damageKey(100), []byte(`{"n":1}`))
	if err != nil {
		t.Fatalf("Create after space was freed: %v", err)
	}
	select {
	case ev := <-w.Events():
		if ev.Object.Key != damageKey(100) || ev.Object.ModRevision != rev {
			t.Fatalf("watch got %s at %d, want %s at %d", ev.Object.Key, ev.Object.ModRevision, damageKey(100), rev)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the watch did not see the write after space returned (err %v)", w.Err())
	}
	if _, low := db.FreeSpace(); low {
		t.Fatal("FreeSpace still low after space was freed")
	}
}

// TestOpenReadOnlyWhenDiskFull opens a store on a full filesystem: Open
// must succeed read-only (Badger opened writable would flush its memtables
// through maps of sparse files, die of SIGBUS, and do so again at every
// restart), serve reads, refuse writes with ErrNoSpace, and become writable
// by itself once space is freed.
func TestOpenReadOnlyWhenDiskFull(t *testing.T) {
	dir := storetest.MountSmallDisk(t, 64<<20)
	ctx := context.Background()
	path := filepath.Join(dir, "store")
	db, err := badger.Open(path, spaceOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := db.Create(ctx, damageKey(i), []byte(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	filler := fillDisk(t, dir)

	db, err = badger.Open(path, spaceOptions())
	if err != nil {
		t.Fatalf("Open on a full disk: %v", err)
	}
	defer db.Close()
	res, err := db.List(ctx, "/widgets/", store.ListOptions{})
	if err != nil || len(res.Items) != 200 {
		t.Fatalf("List read-only: %d items, %v; want 200", len(res.Items), err)
	}
	_, err = db.Create(ctx, damageKey(200), []byte(`{"n":1}`))
	assertNoSpace(t, err)
	if _, err := db.Create(ctx, damageKey(1), []byte(`{"n":1}`)); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("Create of an existing key read-only: %v; want ErrAlreadyExists", err)
	}
	rev, _ := db.CurrentRevision(ctx)
	assertNoSpace(t, db.Compact(ctx, rev))

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 10*time.Second, "a Create to succeed after space was freed", func() (bool, string) {
		_, err := db.Create(ctx, damageKey(200), []byte(`{"n":1}`))
		if err != nil && !errors.Is(err, store.ErrNoSpace) {
			t.Fatalf("Create after space was freed: %v", err)
		}
		return err == nil, fmt.Sprint(err)
	})
	res, err = db.List(ctx, "/widgets/", store.ListOptions{})
	if err != nil || len(res.Items) != 201 {
		t.Fatalf("List after reopening writable: %d items, %v; want 201", len(res.Items), err)
	}
}

// TestCloseOnFullDisk closes a store whose memtable holds writes while the
// disk is full: Badger's Close would flush the memtable through a map of a
// sparse file and die of SIGBUS; the store must return instead.
func TestCloseOnFullDisk(t *testing.T) {
	dir := storetest.MountSmallDisk(t, 64<<20)
	db, err := badger.Open(filepath.Join(dir, "store"), spaceOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := db.Create(context.Background(), damageKey(i), []byte(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	fillDisk(t, dir)
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// uncleanDirEnv selects uncleanChild in TestMain.
const uncleanDirEnv = "SETPOINT_UNCLEAN_CHILD_DIR"

// uncleanChild writes 100 documents to the store in dir and exits without
// closing it, as a crash would: its log is left for the next Open to replay.
func uncleanChild(dir string) {
	db, err := badger.Open(dir, spaceOptions())
	if err == nil {
		for i := range 100 {
			if _, err = db.Create(context.Background(), damageKey(i), []byte(`{"n":1}`)); err != nil {
				break
			}
		}
	}
	if err != nil {
		println("unclean child:", err.Error())
		os.Exit(3)
	}
	os.Exit(0)
}

// TestOpenFullDiskAfterCrash opens, on a full disk, a store whose last
// process died without closing it: Badger cannot replay the log read-only,
// and writable it would flush it through maps of sparse files and die of
// SIGBUS. Open must refuse with ErrNoSpace and a message saying to free
// space, and open with every document once space is freed.
func TestOpenFullDiskAfterCrash(t *testing.T) {
	dir := storetest.MountSmallDisk(t, 64<<20)
	path := filepath.Join(dir, "store")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), uncleanDirEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v %s", err, out)
	}
	filler := fillDisk(t, dir)
	db, err := badger.Open(path, spaceOptions())
	if err == nil {
		db.Close()
		t.Fatal("Open on a full disk after a crash succeeded")
	}
	if !errors.Is(err, store.ErrNoSpace) || !strings.Contains(err.Error(), "free space on that filesystem and start again") {
		t.Fatalf("Open: %v; want ErrNoSpace saying what to do", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	db, err = badger.Open(path, spaceOptions())
	if err != nil {
		t.Fatalf("Open once space was freed: %v", err)
	}
	defer db.Close()
	res, err := db.List(context.Background(), "/widgets/", store.ListOptions{})
	if err != nil || len(res.Items) != 100 {
		t.Fatalf("List: %d items, %v; want 100", len(res.Items), err)
	}
}

// TestNewStoreOnFullDisk creates a store on a full disk: Open must refuse
// with ErrNoSpace, not create files it cannot write.
func TestNewStoreOnFullDisk(t *testing.T) {
	dir := storetest.MountSmallDisk(t, 64<<20)
	if err := os.Mkdir(filepath.Join(dir, "made"), 0o700); err != nil {
		t.Fatal(err)
	}
	fillDisk(t, dir)
	// A directory that exists (the reserve check refuses) and one that
	// cannot be made (the filesystem does).
	for _, sub := range []string{"made", "new"} {
		db, err := badger.Open(filepath.Join(dir, sub), spaceOptions())
		if err == nil {
			db.Close()
			t.Fatalf("Open of a new store in %s on a full disk succeeded", sub)
		}
		if !errors.Is(err, store.ErrNoSpace) || !strings.Contains(err.Error(), "space") {
			t.Fatalf("Open in %s: %v; want ErrNoSpace", sub, err)
		}
	}
}
