package badger_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// TestLargeValues writes documents above Badger's value threshold, so that
// they and their history records live in the value log, with value-log GC
// running all the while, and reads them back before and after a reopen.
func TestLargeValues(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := testOptions() // 4 MiB memtables: the value threshold is 400 KiB
	opts.ValueLogGCInterval = time.Millisecond
	db, err := badger.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	big := func(k, i int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("%d-%d.", k, i)), 450<<10/4)
	}
	start, _ := db.CurrentRevision(ctx)
	type write struct {
		key string
		rev int64
		val []byte
	}
	var mu sync.Mutex
	var writes []write
	var wg sync.WaitGroup
	for k := range 3 {
		wg.Go(func() {
			key := fmt.Sprintf("/g/big/k%d", k)
			for i := range 4 {
				v := big(k, i)
				var rev int64
				var err error
				if i == 0 {
					rev, err = db.Create(ctx, key, v)
				} else {
					rev, err = db.Update(ctx, key, v, 0)
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				writes = append(writes, write{key, rev, v})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	check := func(db *badger.DB, when string) {
		t.Helper()
		for _, w := range writes {
			kv, err := db.Get(ctx, w.key, store.GetOptions{Revision: w.rev})
			if err != nil || !bytes.Equal(kv.Value, w.val) || kv.ModRevision != w.rev {
				t.Fatalf("%s: Get %s at %d: %v", when, w.key, w.rev, err)
			}
		}
		wt, err := db.Watch(ctx, "/g/big/", start)
		if err != nil {
			t.Fatal(err)
		}
		defer wt.Stop()
		for range writes {
			ev := <-wt.Events()
			found := false
			for _, w := range writes {
				if w.rev == ev.Revision() {
					found = w.key == ev.Object.Key && bytes.Equal(w.val, ev.Object.Value)
				}
			}
			if !found {
				t.Fatalf("%s: event %d on %s does not match its write", when, ev.Revision(), ev.Object.Key)
			}
		}
	}
	check(db, "open")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = badger.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db, "reopened")
}
