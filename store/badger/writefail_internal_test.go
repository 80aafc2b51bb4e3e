package badger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

// A group whose write fails (as a failed sync does) fails every write of the
// group, those that passed their checks and those that did not; nothing of
// the group is visible to reads or watches, every later write is refused,
// and the store reopens at the revision before the group.
func TestWriteFailureFailsTheGroup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	base, err := db.Create(ctx, "/f/a", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := db.Watch(ctx, "/f/", base)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop() // events after base

	syncErr := errors.New("sync: input/output error")
	faults := make(chan int64, 4)
	release := make(chan struct{})
	db.writeFault = func(last int64) error {
		faults <- last
		if last == base+1 {
			<-release // the group before: held, then written
			return nil
		}
		return syncErr
	}
	// While the group before is held in its write, three writes queue and
	// form the next group: a create, an update at the current revision, and
	// a create of an existing key, which fails its check.
	before := make(chan error, 1)
	go func() {
		_, err := db.Create(ctx, "/f/z", []byte(`{"z":1}`))
		before <- err
	}()
	if last := <-faults; last != base+1 {
		t.Fatalf("first group ends at %d, want %d", last, base+1)
	}
	out := make(chan error, 3)
	go func() {
		_, err := db.Create(ctx, "/f/b", []byte(`{"b":1}`))
		out <- err
	}()
	go func() {
		_, err := db.Update(ctx, "/f/a", []byte(`{"a":2}`), base)
		out <- err
	}()
	go func() {
		_, err := db.Create(ctx, "/f/a", nil)
		out <- err
	}()
	waitQueue(t, db, func(q *writeQueue) bool { return len(q.pending) == 3 })
	close(release)
	if err := <-before; err != nil {
		t.Fatalf("the group before: %v", err)
	}
	for range 3 {
		if err := <-out; !errors.Is(err, errFailed) || !errors.Is(err, syncErr) {
			t.Errorf("write of the failed group: %v, want the write failure", err)
		}
	}
	if last := <-faults; last != base+3 {
		t.Errorf("failed group ends at %d, want %d (the create and the update)", last, base+3)
	}
	select {
	case last := <-faults:
		t.Errorf("a group ending at %d was written after the failed one", last)
	default:
	}
	base++ // the group before is committed
	select {
	case ev := <-w.Events():
		if ev.Revision() != base {
			t.Errorf("event at %d, want %d", ev.Revision(), base)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event for the group before the failed one")
	}
	if cur, _ := db.CurrentRevision(ctx); cur != base {
		t.Errorf("current revision %d after the failure, want %d", cur, base)
	}
	if _, err := db.Get(ctx, "/f/b", store.GetOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of the failed create: %v, want ErrNotFound", err)
	}
	if kv, err := db.Get(ctx, "/f/a", store.GetOptions{}); err != nil || kv.ModRevision != base-1 {
		t.Errorf("Get of the failed update's key: %v %+v, want revision %d", err, kv, base-1)
	}
	if _, err := db.Create(ctx, "/f/c", nil); !errors.Is(err, errFailed) {
		t.Errorf("a later write: %v, want the store's failure", err)
	}
	select {
	case ev, ok := <-w.Events():
		if ok {
			t.Errorf("event %v at %d of a failed group", ev.Type, ev.Revision())
		}
	default:
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := db.CurrentRevision(ctx); cur != base {
		t.Errorf("reopened at revision %d, want %d", cur, base)
	}
	if r, err := db.Create(ctx, "/f/b", nil); err != nil || r != base+1 {
		t.Errorf("create after reopening: %d %v, want revision %d", r, err, base+1)
	}
}

// waitQueue waits (bounded) until cond holds of the write queue.
func waitQueue(t *testing.T, db *DB, cond func(*writeQueue) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		db.queue.mu.Lock()
		ok := cond(&db.queue)
		db.queue.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the write queue never reached the expected state")
		}
		time.Sleep(time.Millisecond)
	}
}
