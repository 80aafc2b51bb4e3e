package badger_test

import (
	"testing"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/storetest"
)

// testOptions keeps Badger small: many stores open during a test run.
func testOptions() badger.Options {
	return badger.Options{
		WatchBuffer:    16,
		EventRing:      64,
		MemTableSize:   4 << 20,
		BlockCacheSize: 4 << 20,
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		db, err := badger.Open(t.TempDir(), testOptions())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return db
	}, storetest.Capabilities{WatchBuffer: 16})
}
