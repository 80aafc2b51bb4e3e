package badger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
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
			// Let the watcher go live, then write while nobody reads.
			time.Sleep(50 * time.Millisecond)
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
