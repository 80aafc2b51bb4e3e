package store

import "errors"

// The store's errors. Backends wrap them with %w; callers test with errors.Is.
// The API maps them to HTTP codes: ErrNotFound 404, ErrAlreadyExists and
// ErrConflict 409, ErrCompacted and ErrInvalidContinue 410, ErrTooLarge 413,
// ErrNoSpace 507, ErrUnavailable 503, ErrCorrupt 500, ErrWriteTimedOut 504.
var (
	ErrNotFound        = errors.New("store: not found")
	ErrAlreadyExists   = errors.New("store: already exists")
	ErrConflict        = errors.New("store: revision conflict")
	ErrCompacted       = errors.New("store: revision compacted")
	ErrFutureRevision  = errors.New("store: revision is in the future")
	ErrInvalidContinue = errors.New("store: invalid continue token")
	ErrWatcherTooSlow  = errors.New("store: watcher fell behind; resume from its last revision")
	ErrClosed          = errors.New("store: closed")
	// ErrCorrupt: the store found damaged data; it refuses reads and writes
	// rather than answer from a part of its data.
	ErrCorrupt = errors.New("store: data is damaged")
	// ErrNoSpace: the store refuses writes because its disk is (nearly)
	// full; reads and watches go on, and writes resume when space returns.
	ErrNoSpace = errors.New("store: not enough free disk space")
	// ErrTooLarge: a document is over the backend's size limit for one
	// write (etcd's request limit).
	ErrTooLarge = errors.New("store: document is over the backend's size limit")
	// ErrUnavailable: the backend cannot be reached or cannot answer now
	// (an etcd without quorum); the request may succeed later.
	ErrUnavailable = errors.New("store: backend unavailable")
	// ErrWriteTimedOut: the caller's context ended while its write waited
	// for the disk; the write was queued and may still be committed.
	ErrWriteTimedOut = errors.New("store: write timed out; it may still be committed")
)

// StopPages is what a ListPages visitor returns to end the list early. It
// is not returned by any function: ListPages returns nil in its place, as
// filepath.WalkDir does for filepath.SkipAll.
var StopPages = errors.New("store: stop listing pages")
