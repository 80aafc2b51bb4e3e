package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// lowStore is a store whose close does not return on a nearly full disk.
type lowStore struct {
	closerFunc
	free int64
}

func (s lowStore) FreeSpace() (int64, bool) { return s.free, true }

// TestCloseStoreBounded: a store that closes returns its close's result; one
// whose close does not return is given up after the timeout with an error
// that says so, why, and what the next start does (the server reports it
// once, as its result: closeStore has nothing to log with).
func TestCloseStoreBounded(t *testing.T) {
	if err := closeStore(closerFunc(func() error { return nil }), time.Minute); err != nil {
		t.Fatalf("a store that closes: %v", err)
	}
	failed := errors.New("sync: input/output error")
	if err := closeStore(closerFunc(func() error { return failed }), time.Minute); !errors.Is(err, failed) {
		t.Fatalf("a store whose close fails: %v, want %v", err, failed)
	}

	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	err := closeStore(closerFunc(func() error { <-release; return nil }), 50*time.Millisecond)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("closeStore waited %v for a stuck store, want about 50ms", took)
	}
	for _, want := range []string{"store did not close in time", "--store-close-timeout 50ms", "stalled or frozen filesystem", "replays the store's log"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("a stuck store: err %v; want one saying %q", err, want)
		}
	}

	// On a nearly full disk the reason says so, with the free bytes.
	err = closeStore(lowStore{closerFunc(func() error { <-release; return nil }), 4096}, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "nearly full (4096 bytes free)") {
		t.Fatalf("a stuck store on a full disk: err %v; want the reason with the free bytes", err)
	}
}
