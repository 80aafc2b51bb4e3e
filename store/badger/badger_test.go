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

func TestConformance(t *testing.T) {
	open := func(opts badger.Options) func(t *testing.T) store.Store {
		return func(t *testing.T) store.Store {
			db, err := badger.Open(t.TempDir(), opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return db
		}
	}
	slow := testOptions()
	slow.WatchBuffer = 16
	storetest.Run(t, open(testOptions()), storetest.Capabilities{
		NewSlowWatchStore: open(slow),
		SlowWatchBuffer:   slow.WatchBuffer,
	})
}
