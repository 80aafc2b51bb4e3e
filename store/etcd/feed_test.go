package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
)

// TestWatchesShareOneEtcdWatch: watches from the current revision, and from
// a revision the shared feed still holds, are served by one etcd watch,
// each with exactly the events under its own prefix, in order; a watch from
// further back than the feed holds gets an etcd watch of its own and the
// same events; once every watch has stopped, the next starts a new feed.
func TestWatchesShareOneEtcdWatch(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, Prefix: "/feed", CompactionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	put := func(key string) int64 {
		t.Helper()
		rev, err := db.Create(ctx, key, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	before := put("/old/0") // before any feed
	put("/old/1")           // the feed starts after this one
	cur, err := db.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const prefixes = 20
	watches := make([]store.Watcher, 0, prefixes+2)
	for i := range prefixes {
		w, err := db.Watch(ctx, fmt.Sprintf("/p%02d/", i), 0)
		if err != nil {
			t.Fatal(err)
		}
		watches = append(watches, w)
	}
	if n := etcd.EtcdWatches(db); n != 1 {
		t.Fatalf("%d watches opened %d etcd watches, want 1", prefixes, n)
	}
	var revs [prefixes][]int64
	for round := range 3 {
		for i := range prefixes {
			revs[i] = append(revs[i], put(fmt.Sprintf("/p%02d/k%d", i, round)))
		}
	}
	// A watch from a revision the feed holds joins it and replays from
	// there; one from before the feed started gets its own etcd watch.
	joined, err := db.Watch(ctx, "/p03/", revs[3][0])
	if err != nil {
		t.Fatal(err)
	}
	if n := etcd.EtcdWatches(db); n != 1 {
		t.Fatalf("a watch the feed can replay for opened an etcd watch (%d in all)", n)
	}
	behind, err := db.Watch(ctx, "/p03/", before)
	if err != nil {
		t.Fatal(err)
	}
	if n := etcd.EtcdWatches(db); n != 2 {
		t.Fatalf("a watch from before the feed: %d etcd watches in all, want 2", n)
	}
	if before >= cur {
		t.Fatalf("revision %d not before the feed's start %d", before, cur)
	}

	expect := func(w store.Watcher, name string, want []int64) {
		t.Helper()
		for _, rev := range want {
			select {
			case ev, ok := <-w.Events():
				if !ok {
					t.Fatalf("%s: ended before revision %d: %v", name, rev, w.Err())
				}
				if ev.Revision() != rev || ev.Type != store.Added {
					t.Fatalf("%s: got %s at %d, want ADDED at %d", name, ev.Type, ev.Revision(), rev)
				}
			case <-ctx.Done():
				t.Fatalf("%s: no event at %d", name, rev)
			}
		}
		select {
		case ev := <-w.Events():
			t.Fatalf("%s: unexpected event at %d (%s)", name, ev.Revision(), ev.Object.Key)
		case <-time.After(100 * time.Millisecond):
		}
		if rev, ok := w.Progress(); !ok || rev < want[len(want)-1] {
			t.Fatalf("%s: Progress %d %v, want at least %d", name, rev, ok, want[len(want)-1])
		}
	}
	for i, w := range watches {
		expect(w, fmt.Sprintf("watch of /p%02d/", i), revs[i])
	}
	expect(joined, "joined watch", revs[3][1:])
	expect(behind, "watch from before the feed", revs[3])

	for _, w := range append(watches, joined, behind) {
		w.Stop()
		for range w.Events() {
		}
		if err := w.Err(); err != nil {
			t.Fatalf("Err after Stop: %v", err)
		}
	}
	w, err := db.Watch(ctx, "/p00/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if n := etcd.EtcdWatches(db); n != 3 {
		t.Fatalf("a watch after every other stopped: %d etcd watches in all, want 3 (a new feed)", n)
	}
	rev := put("/p00/after")
	expect(w, "watch on the new feed", []int64{rev})
}
