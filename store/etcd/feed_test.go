package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// TestFeedRingPastItsSize: once the feed has received more events than its
// ring keeps, its floor moves up; a watch from the floor still joins the
// feed, one from below it gets an etcd watch of its own with every event
// since, and one from below a compacted revision fails with ErrCompacted.
func TestFeedRingPastItsSize(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, Prefix: "/ring", CompactionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The ring keeps 4 to 7 events: the 8th trims it to its newest 4.
	const keep = 4
	etcd.SetFeedRing(db, keep)

	first, err := db.Watch(ctx, "/k/", 0) // starts the feed
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	var revs []int64
	for i := range 2*keep + 2 {
		rev, err := db.Create(ctx, fmt.Sprintf("/k/%02d", i), []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	expectRevs := func(w store.Watcher, name string, want []int64) {
		t.Helper()
		for _, rev := range want {
			select {
			case ev, ok := <-w.Events():
				if !ok {
					t.Fatalf("%s: ended before revision %d: %v", name, rev, w.Err())
				}
				if ev.Revision() != rev {
					t.Fatalf("%s: got revision %d, want %d", name, ev.Revision(), rev)
				}
			case <-ctx.Done():
				t.Fatalf("%s: no event at %d", name, rev)
			}
		}
	}
	// The feed has published every event once its first watch has them,
	// and trimmed its ring (to revs[4:8] at the 8th event, when etcd sends
	// one event at a time).
	expectRevs(first, "the feed's first watch", revs)
	if n := etcd.EtcdWatches(db); n != 1 {
		t.Fatalf("%d etcd watches before any watch from the past, want 1", n)
	}
	floor := etcd.FeedFloor(db)
	at := slices.Index(revs, floor)
	if at < 2 || at > len(revs)-2 {
		t.Fatalf("the feed's floor is %d after revisions %v: it did not move up as the ring filled", floor, revs)
	}

	atFloor, err := db.Watch(ctx, "/k/", floor)
	if err != nil {
		t.Fatal(err)
	}
	defer atFloor.Stop()
	if n := etcd.EtcdWatches(db); n != 1 {
		t.Fatalf("a watch from the feed's floor opened an etcd watch (%d in all)", n)
	}
	expectRevs(atFloor, "watch from the floor", revs[at+1:])

	belowFloor, err := db.Watch(ctx, "/k/", revs[at-1])
	if err != nil {
		t.Fatal(err)
	}
	defer belowFloor.Stop()
	if n := etcd.EtcdWatches(db); n != 2 {
		t.Fatalf("a watch from below the feed's floor: %d etcd watches in all, want 2", n)
	}
	expectRevs(belowFloor, "watch from below the floor", revs[at:])

	if err := db.Compact(ctx, revs[at-1]); err != nil {
		t.Fatal(err)
	}
	if w, err := db.Watch(ctx, "/k/", revs[at-2]); !errors.Is(err, store.ErrCompacted) {
		if w != nil {
			w.Stop()
		}
		t.Fatalf("a watch from a compacted revision below the floor: %v, want %v", err, store.ErrCompacted)
	}
	if n := etcd.EtcdWatches(db); n != 2 {
		t.Fatalf("a refused watch opened an etcd watch (%d in all)", n)
	}
	// The shared watches go on together past the trim.
	rev, err := db.Create(ctx, "/k/last", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]store.Watcher{"first": first, "at the floor": atFloor, "below the floor": belowFloor} {
		expectRevs(w, name, []int64{rev})
	}
}
