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
}
