package badger_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// uncleanLargeDirEnv selects uncleanLargeChild in TestMain.
const uncleanLargeDirEnv = "SETPOINT_UNCLEAN_LARGE_CHILD_DIR"

// largeDoc is the document uncleanLargeChild writes as its ith: larger
// than the value threshold of spaceOptions, so kept in the value log.
func largeDoc(i int) []byte {
	return []byte(`{"n":"` + strings.Repeat(strconv.Itoa(i), 600<<10) + `"}`)
}

// uncleanLargeChild writes 4 large documents to the store in dir and exits
// without closing it: their values are in the value log, which the next
// Open replays.
func uncleanLargeChild(dir string) {
	db, err := badger.Open(dir, spaceOptions())
	if err == nil {
		for i := range 4 {
			if _, err = db.Create(context.Background(), damageKey(i), largeDoc(i)); err != nil {
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

// editLog applies edit to the first 64 MiB of path, in place: the logs
// are large sparse files with their data at the start.
func editLog(t *testing.T, path string, edit func(b []byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 64<<20)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	b = b[:n]
	edit(b)
	if _, err := f.WriteAt(b, 0); err != nil {
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
	t.Run("value log damaged mid-log", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "store")
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), uncleanLargeDirEnv+"="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v %s", err, out)
		}
		vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
		if len(vlogs) != 1 {
			t.Fatalf("value logs %v, want one", vlogs)
		}
		editLog(t, vlogs[0], func(b []byte) {
			i := bytes.Index(b, largeDoc(1))
			if i < 0 {
				t.Fatal("document not in the value log")
			}
			b[i+1000] ^= 0xff
		})
		db, err := badger.Open(dir, spaceOptions())
		if err == nil {
			db.Close()
			t.Fatal("Open succeeded over a value log damaged before its end")
		}
		assertDamage(t, err, vlogs[0])
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
