package main

import (
	"bytes"
	"errors"
	"log/slog"
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
// and a log line that say why and what the next start does.
func TestCloseStoreBounded(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))

	if err := closeStore(closerFunc(func() error { return nil }), time.Minute, log); err != nil {
		t.Fatalf("a store that closes: %v", err)
	}
	failed := errors.New("sync: input/output error")
	if err := closeStore(closerFunc(func() error { return failed }), time.Minute, log); !errors.Is(err, failed) {
		t.Fatalf("a store whose close fails: %v, want %v", err, failed)
	}

	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	err := closeStore(closerFunc(func() error { <-release; return nil }), 50*time.Millisecond, log)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("closeStore waited %v for a stuck store, want about 50ms", took)
	}
	if err == nil || !strings.Contains(err.Error(), "not closed within 50ms") || !strings.Contains(err.Error(), "replays the store's log") {
		t.Fatalf("a stuck store: err %v; want one saying it was not closed and what the next start does", err)
	}
	if !strings.Contains(buf.String(), "store did not close in time") || !strings.Contains(buf.String(), "reason=") {
		t.Fatalf("a stuck store's log does not say why:\n%s", buf.String())
	}

	// On a nearly full disk the reason says so, with the free bytes.
	buf.Reset()
	err = closeStore(lowStore{closerFunc(func() error { <-release; return nil }), 4096}, 50*time.Millisecond, log)
	if err == nil || !strings.Contains(err.Error(), "nearly full") || !strings.Contains(buf.String(), "free_bytes=4096") {
		t.Fatalf("a stuck store on a full disk: err %v; log:\n%s", err, buf.String())
	}
}
