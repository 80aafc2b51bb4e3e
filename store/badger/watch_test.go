package badger_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestWatcherBufferBeyondChannel checks a live watcher that falls behind by
// more than its small channel holds but less than WatchBuffer: it is not
// cut off and later gets every event in order; one that falls behind by
// more than WatchBuffer is cut off with ErrWatcherTooSlow after a gapless
// run of events; Stop and Close end a watcher that is behind.
func TestWatcherBufferBeyondChannel(t *testing.T) {
	const buffer = 200
	tests := []struct {
		name    string
		writes  int
		end     string // how the test ends the watcher: "read", "stop" or "close"
		wantCut bool
	}{
		{name: "within the buffer", writes: buffer - 10, end: "read"},
		{name: "past the buffer", writes: 2 * buffer, end: "read", wantCut: true},
		{name: "stopped while behind", writes: buffer / 2, end: "stop"},
		{name: "closed while behind", writes: buffer / 2, end: "close"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			opts := testOptions()
			opts.WatchBuffer = buffer
			opts.EventRing = 4 * buffer
			db, err := badger.Open(t.TempDir(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			prefix := store.ResourcePrefix("example.setpoint.dev", "widgets", "default")
			k := store.ObjectKey("example.setpoint.dev", "widgets", "default", "w")
			from, err := db.Create(ctx, k, []byte(`{"v":0}`))
			if err != nil {
				t.Fatal(err)
			}
			w, err := db.Watch(ctx, prefix, from)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			// Let the watcher go live, then write while nobody reads. Its
			// catch-up goroutine may run late on a loaded machine: still
			// catching up, it would take the writes from the ring at its own
			// pace and never be cut off.
			testsupport.Eventually(t, 10*time.Second, "the watcher to go live", func() bool { return badger.WatcherLive(db, w) })
			rev := from
			for i := range tc.writes {
				if rev, err = db.Update(ctx, k, fmt.Appendf(nil, `{"v":%d}`, i+1), rev); err != nil {
					t.Fatal(err)
				}
			}
			switch tc.end {
			case "stop":
				w.Stop()
			case "close":
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
			last := from
			timeout := time.After(10 * time.Second)
			for done := false; !done; {
				select {
				case ev, ok := <-w.Events():
					if !ok {
						done = true
						break
					}
					if ev.Revision() != last+1 {
						t.Fatalf("revision %d after %d", ev.Revision(), last)
					}
					last = ev.Revision()
					if tc.end == "read" && !tc.wantCut && last == rev {
						return // every event arrived, in order
					}
				case <-timeout:
					t.Fatalf("events stopped at %d of %d without the channel closing", last, rev)
				}
			}
			switch {
			case tc.wantCut && w.Err() != store.ErrWatcherTooSlow:
				t.Fatalf("Err %v after %d of %d events, want ErrWatcherTooSlow", w.Err(), last-from, rev-from)
			case tc.wantCut && last >= rev:
				t.Fatalf("a watcher %d events behind got them all", tc.writes)
			case tc.end == "read" && !tc.wantCut:
				t.Fatalf("channel closed (%v) after %d of %d events", w.Err(), last-from, rev-from)
			case tc.end == "stop" && w.Err() != nil:
				t.Fatalf("Err %v after Stop, want nil", w.Err())
			case tc.end == "close" && w.Err() != store.ErrClosed:
				t.Fatalf("Err %v after Close, want ErrClosed", w.Err())
			}
		})
	}
}

// TestWatcherProgress checks that Progress moves with writes under other
// prefixes, and that every event of the watcher's own prefix up to the
// revision it reports is already in Events when it reports it, while writers
// on both prefixes run.
func TestWatcherProgress(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mine := store.ResourcePrefix("example.setpoint.dev", "widgets", "mine")
	from, err := db.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := db.Watch(ctx, mine, from)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Writes elsewhere only: progress reaches them, with no event.
	var last int64
	for i := range 20 {
		if last, err = db.Create(ctx, store.ObjectKey("example.setpoint.dev", "widgets", "other", fmt.Sprint("o", i)), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Poll(t, 10*time.Second, fmt.Sprint("Progress ", last, " or more"), func() (bool, string) {
		p, ok := w.Progress()
		return ok && p >= last, fmt.Sprintf("Progress = %d, %v", p, ok)
	})
	select {
	case ev := <-w.Events():
		t.Fatalf("event %s of another prefix", ev.Object.Key)
	default:
	}

	// Writers on both prefixes; the reader snapshots Progress, then takes
	// what Events holds, and records how many of its events it had then.
	type snapshot struct {
		progress int64
		received int
	}
	var (
		snaps    []snapshot
		received []int64
		mu       sync.Mutex
		revs     []int64 // revisions of the writes under mine
		wg       sync.WaitGroup
	)
	const perWriter = 150
	for wr := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := "other"
			if wr%2 == 0 {
				ns = "mine"
			}
			for i := range perWriter {
				rev, err := db.Create(ctx, store.ObjectKey("example.setpoint.dev", "widgets", ns, fmt.Sprintf("w%d-%d", wr, i)), []byte(`{}`))
				if err != nil {
					t.Error(err)
					return
				}
				if ns == "mine" {
					mu.Lock()
					revs = append(revs, rev)
					mu.Unlock()
				}
			}
		}()
	}
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()
	take := func() {
		for {
			select {
			case ev := <-w.Events():
				received = append(received, ev.Revision())
			default:
				return
			}
		}
	}
	for running := true; running; {
		select {
		case <-writersDone:
			running = false
		default:
		}
		if p, ok := w.Progress(); ok {
			take()
			snaps = append(snaps, snapshot{progress: p, received: len(received)})
		} else {
			take()
		}
		time.Sleep(200 * time.Microsecond)
	}
	if len(snaps) == 0 {
		t.Fatal("Progress never reported a revision while writers ran")
	}
	slices.Sort(revs)
	for _, s := range snaps {
		want, _ := slices.BinarySearch(revs, s.progress+1) // writes under mine up to progress
		if s.received < want {
			t.Fatalf("Progress %d reported with %d of the %d events up to it in Events", s.progress, s.received, want)
		}
	}
	for i := 1; i < len(received); i++ {
		if received[i] <= received[i-1] {
			t.Fatalf("revision %d after %d", received[i], received[i-1])
		}
	}
}

// TestStopWhileCatchingUpLeavesNoGap stops a watcher that is still catching
// up from history while its consumer reads on until the channel closes: what
// it gets must still be a gapless run, so that it can resume after the last
// event it received.
func TestStopWhileCatchingUpLeavesNoGap(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start, err := db.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		if _, err := db.Create(ctx, store.ObjectKey("example.setpoint.dev", "widgets", "gap", fmt.Sprintf("w%04d", i)), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		w, err := db.Watch(ctx, store.ResourcePrefix("example.setpoint.dev", "widgets", "gap"), start)
		if err != nil {
			t.Fatal(err)
		}
		last := (<-w.Events()).Revision()
		w.Stop()
		for ev := range w.Events() {
			if ev.Revision() != last+1 {
				t.Fatalf("revision %d after %d: a gap before the channel closed", ev.Revision(), last)
			}
			last = ev.Revision()
		}
	}
}
