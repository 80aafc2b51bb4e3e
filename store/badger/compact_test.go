package badger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// fakeClock is the compactor's clock: the test moves it, and learns through
// calls when the compactor has looked at it.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	calls chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	now := c.now
	c.mu.Unlock()
	select {
	case c.calls <- now:
	default:
	}
	return now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// waitTicks waits until the compactor has read the clock n times at or after
// since.
func (c *fakeClock) waitTicks(t *testing.T, n int, since time.Time) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for n > 0 {
		select {
		case at := <-c.calls:
			if !at.Before(since) {
				n--
			}
		case <-deadline:
			t.Fatal("the background compactor did not run")
		}
	}
}

// TestBackgroundCompaction checks that the compactor keeps the window by time
// and by count, whichever keeps more.
func TestBackgroundCompaction(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: t0, calls: make(chan time.Time, 1)}
	opts := testOptions()
	opts.CompactionInterval = 5 * time.Millisecond
	opts.CompactionWindow = time.Hour
	opts.CompactionMinRevisions = 5
	opts.Now = clock.Now
	db, err := badger.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rev int64
	for i := range 20 {
		if i == 0 {
			rev, err = db.Create(ctx, "/g/r/a", []byte("0"))
		} else {
			rev, err = db.Update(ctx, "/g/r/a", []byte{byte(i)}, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Within the window: several rounds compact nothing.
	clock.waitTicks(t, 3, t0)
	if _, err := db.Get(ctx, "/g/r/a", store.GetOptions{Revision: 2}); err != nil {
		t.Fatalf("compacted inside the window: %v", err)
	}
	// An hour later the window has passed; the count still keeps 5 revisions.
	clock.advance(2 * time.Hour)
	clock.waitTicks(t, 2, t0.Add(2*time.Hour))
	if _, err := db.Get(ctx, "/g/r/a", store.GetOptions{Revision: rev - 6}); !errors.Is(err, store.ErrCompacted) {
		t.Errorf("Get at %d after the window: %v, want ErrCompacted", rev-6, err)
	}
	if _, err := db.Get(ctx, "/g/r/a", store.GetOptions{Revision: rev - 5}); err != nil {
		t.Errorf("Get at %d, within the last 5 revisions: %v", rev-5, err)
	}
}
