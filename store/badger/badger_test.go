package badger_test

import (
	"testing"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/storetest"
)

// testOptions keeps Badger small: many stores open during a test run. The
// small ring makes watchers that start behind replay from disk.
func testOptions() badger.Options {
	return badger.Options{
		WatchBuffer:    1024,
		EventRing:      64,
		MemTableSize:   4 << 20,
		BlockCacheSize: 4 << 20,
	}
}

func TestConformance(t *testing.T) { runConformance(t, testOptions()) }

// TestConformanceTinyEventRing runs the suite with an event ring that keeps
// only its newest event, by bytes: every watcher that starts behind
// replays from the history on disk.
func TestConformanceTinyEventRing(t *testing.T) {
	opts := testOptions()
	opts.EventRingBytes = 1
	runConformance(t, opts)
}

// runConformance runs the store suite on stores opened with opts, and with
// opts and a small WatchBuffer for the slow-watcher cases.
func runConformance(t *testing.T, opts badger.Options) {
	open := func(opts badger.Options) func(t *testing.T) store.Store {
		return func(t *testing.T) store.Store {
			db, err := badger.Open(t.TempDir(), opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return db
		}
	}
	slow := opts
	slow.WatchBuffer = 16
	storetest.Run(t, open(opts), storetest.Capabilities{
		NewSlowWatchStore: open(slow),
		SlowWatchBuffer:   slow.WatchBuffer,
	})
}
