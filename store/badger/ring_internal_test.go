package badger

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// The ring keeps at most EventRingBytes of documents (and always its newest
// event), and a watcher from before the ring's oldest event still gets
// every event, in order, from the history on disk.
func TestEventRingBytesBound(t *testing.T) {
	ctx := context.Background()
	db, err := Open(t.TempDir(), Options{EventRing: 64, EventRingBytes: 10 << 10, MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start, err := db.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := bytes.Repeat([]byte("x"), 2<<10)
	for i := range 20 {
		if _, err := db.Create(ctx, fmt.Sprintf("/big/%02d", i), doc); err != nil {
			t.Fatal(err)
		}
	}
	huge := bytes.Repeat([]byte("y"), 64<<10)
	rev, err := db.Create(ctx, "/big/huge", huge)
	if err != nil {
		t.Fatal(err)
	}
	// The notifier publishes after the commit: wait for it.
	var held int
	var low, notified int64
	testsupport.Poll(t, 10*time.Second, fmt.Sprint("the notifier to publish revision ", rev), func() (bool, string) {
		db.hub.mu.Lock()
		held, low, notified = db.hub.bytes, db.hub.low, db.hub.notified
		db.hub.mu.Unlock()
		return notified >= rev, fmt.Sprint("published up to ", notified)
	})
	if low != notified || held < len(huge) || held > len(huge)+64 {
		t.Errorf("after a 64 KiB document the ring holds revisions %d..%d, %d bytes; want only the newest event", low, notified, held)
	}
	w, err := db.Watch(ctx, "/big/", start)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := range 21 {
		ev := <-w.Events()
		want := fmt.Sprintf("/big/%02d", i)
		if i == 20 {
			want = "/big/huge"
		}
		if ev.Object.Key != want {
			t.Fatalf("event %d is %s, want %s", i, ev.Object.Key, want)
		}
	}
}
