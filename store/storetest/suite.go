// Package storetest is the conformance suite of the store contract: every
// backend (store/badger, store/etcd) runs Run against a real instance.
//
// It imports only the store contract and the standard library.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

// Capabilities tells the suite what it needs to know about a backend.
type Capabilities struct {
	// NewSlowWatchStore opens a fresh, empty store whose watchers have a
	// channel buffer of SlowWatchBuffer events. Only the slow-watcher test
	// uses it; it writes several times more events than the buffer holds.
	NewSlowWatchStore func(t *testing.T) store.Store
	SlowWatchBuffer   int
}

// Run runs the whole suite. newStore opens a fresh, empty store whose
// watchers buffer at least 1,000 events: the suite reads watchers while
// writers run, and a scheduling hiccup on a loaded machine must not cut one
// off. The suite closes every store it opens.
func Run(t *testing.T, newStore func(t *testing.T) store.Store, caps Capabilities) {
	if caps.NewSlowWatchStore == nil || caps.SlowWatchBuffer <= 0 {
		t.Fatal("storetest: Capabilities.NewSlowWatchStore and SlowWatchBuffer must be set")
	}
	s := suite{newStore: newStore, caps: caps}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"CreateGet", s.testCreateGet},
		{"CompareAndSwap", s.testCompareAndSwap},
		{"RevisionsConsecutive", s.testRevisionsConsecutive},
		{"GetAtRevision", s.testGetAtRevision},
		{"ListAtRevision", s.testListAtRevision},
		{"ListPrefix", s.testListPrefix},
		{"ListPagination", s.testListPagination},
		{"ListFilterLimit", s.testListFilterLimit},
		{"ListKeysOnly", s.testListKeysOnly},
		{"ListPages", s.testListPages},
		{"ContinueErrors", s.testContinueErrors},
		{"ListConsistencyConcurrent", s.testListConsistencyConcurrent},
		{"WatchPrevObjects", s.testWatchPrevObjects},
		{"WatchPrefix", s.testWatchPrefix},
		{"WatchFromZero", s.testWatchFromZero},
		{"WatchOrderingConcurrent", s.testWatchOrderingConcurrent},
		{"WatchResumeEveryRevision", s.testWatchResumeEveryRevision},
		{"WatchStop", s.testWatchStop},
		{"Compaction", s.testCompaction},
		{"SlowWatcher", s.testSlowWatcher},
		{"Close", s.testClose},
		{"Hammer", s.testHammer},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

type suite struct {
	newStore func(t *testing.T) store.Store
	caps     Capabilities
}

// open opens a fresh store that is closed when the test ends.
func (s suite) open(t *testing.T) store.Store {
	t.Helper()
	return closeAtEnd(t, s.newStore(t))
}

func closeAtEnd(t *testing.T, st store.Store) store.Store {
	t.Helper()
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// ctx is the deadline of one test: a hang fails instead of stalling the run.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func key(i int) string {
	return store.ObjectKey("example.setpoint.dev", "widgets", "default", fmt.Sprintf("w%04d", i))
}

var widgets = store.ResourcePrefix("example.setpoint.dev", "widgets", "default")

func doc(s string) []byte { return []byte(`{"v":"` + s + `"}`) }

func mustCreate(t *testing.T, ctx context.Context, st store.Store, k string, v []byte) int64 {
	t.Helper()
	rev, err := st.Create(ctx, k, v)
	if err != nil {
		t.Fatalf("Create(%q): %v", k, err)
	}
	return rev
}

func mustUpdate(t *testing.T, ctx context.Context, st store.Store, k string, v []byte, exp int64) int64 {
	t.Helper()
	rev, err := st.Update(ctx, k, v, exp)
	if err != nil {
		t.Fatalf("Update(%q, exp %d): %v", k, exp, err)
	}
	return rev
}

func mustDelete(t *testing.T, ctx context.Context, st store.Store, k string, exp int64) int64 {
	t.Helper()
	_, rev, err := st.Delete(ctx, k, exp)
	if err != nil {
		t.Fatalf("Delete(%q, exp %d): %v", k, exp, err)
	}
	return rev
}

func mustRev(t *testing.T, ctx context.Context, st store.Store) int64 {
	t.Helper()
	rev, err := st.CurrentRevision(ctx)
	if err != nil {
		t.Fatalf("CurrentRevision: %v", err)
	}
	return rev
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

// collect reads events from w until one at revision upto arrives.
func collect(t *testing.T, ctx context.Context, w store.Watcher, upto int64) []store.Event {
	t.Helper()
	var out []store.Event
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended early after %d events: %v", len(out), w.Err())
			}
			out = append(out, ev)
			if ev.Revision() >= upto {
				return out
			}
		case <-ctx.Done():
			t.Fatalf("watch: %d events, none at %d yet: %v", len(out), upto, ctx.Err())
		}
	}
}
