package badger_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// uncleanStore runs uncleanChild on a new directory: 100 documents written
// and acknowledged, the process gone without closing the store, so that
// they are only in the memtable's log. It returns the directory and the log.
func uncleanStore(t *testing.T) (dir, memLog string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "store")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), uncleanDirEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v %s", err, out)
	}
	mems, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	if len(mems) != 1 {
		t.Fatalf("memtable logs %v, want one", mems)
	}
	return dir, mems[0]
}

// editLog applies edit to the bytes of path.
func editLog(t *testing.T, path string, edit func(b []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// countDocs opens dir and counts the documents uncleanChild wrote.
func countDocs(t *testing.T, dir string) int {
	t.Helper()
	db, err := badger.Open(dir, spaceOptions())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	l, err := db.List(context.Background(), "/widgets/", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// TestOpenRefusesDamagedLog damages an entry in the middle of a memtable
// log that a crash left to replay. Badger's replay stops at the first
// entry whose checksum fails and cuts the log there, so Open would succeed
// without the writes logged after it, acknowledged as they were, and the
// store would serve an older revision as its current one: Open must fail
// with a DamageError naming the log. A last entry cut off by the crash
// (a write never acknowledged) is the log's end, and Open succeeds.
func TestOpenRefusesDamagedLog(t *testing.T) {
	t.Run("sound", func(t *testing.T) {
		dir, _ := uncleanStore(t)
		if n := countDocs(t, dir); n != 100 {
			t.Fatalf("%d documents after replay, want 100", n)
		}
	})
	t.Run("entry damaged mid-log", func(t *testing.T) {
		dir, mem := uncleanStore(t)
		editLog(t, mem, func(b []byte) {
			i := bytes.Index(b, []byte(damageKey(40)))
			if i < 0 {
				t.Fatal("key not in the log")
			}
			b[i+len(damageKey(40))-1] ^= 0xff
		})
		db, err := badger.Open(dir, spaceOptions())
		if err == nil {
			l, _ := db.List(context.Background(), "/widgets/", store.ListOptions{})
			db.Close()
			t.Fatalf("Open succeeded, serving %d of 100 acknowledged documents", len(l.Items))
		}
		assertDamage(t, err, mem)
	})
	t.Run("last entry cut off", func(t *testing.T) {
		dir, mem := uncleanStore(t)
		editLog(t, mem, func(b []byte) {
			end := len(bytes.TrimRight(b, "\x00"))
			b[end-1] ^= 0xff // the last entry's checksum
		})
		if n := countDocs(t, dir); n != 99 {
			t.Fatalf("%d documents after replay, want 99 (the last write cut off)", n)
		}
	})
}
