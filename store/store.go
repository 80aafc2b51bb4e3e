package store

import "context"

// KeyValue is one stored document and the revisions that describe it.
type KeyValue struct {
	// Key is the document's key, as built by ObjectKey.
	Key string
	// Value is the JSON document.
	Value []byte
	// CreateRevision is the revision of the write that created the document.
	CreateRevision int64
	// ModRevision is the revision of the last write to the document; for a
	// deleted document in an event, the revision of the delete.
	ModRevision int64
}

// GetOptions tunes Get.
type GetOptions struct {
	// Revision reads the document as it was at that revision; 0 reads the
	// current state. A revision older than the compacted one gives ErrCompacted,
	// one newer than the current revision gives ErrFutureRevision.
	Revision int64
}

// ListOptions tunes List.
type ListOptions struct {
	// Revision lists the state at that revision; 0 lists the current state.
	// Ignored when Continue is set: a continued list keeps the revision of its
	// first page.
	Revision int64
	// Limit caps the number of items returned; 0 means no cap.
	Limit int64
	// Continue is the token of the previous page, or empty for the first page.
	Continue string
	// Filter, when set, keeps only the documents it accepts. Documents it
	// rejects do not count toward Limit. It must not retain value.
	Filter func(key string, value []byte) bool
	// KeysOnly lists keys and their ModRevision without reading the
	// documents: Items have no Value and no CreateRevision, and Filter, if
	// any, is called with a nil value. For callers that need only names
	// (the modules collector) over documents that may be megabytes each.
	KeysOnly bool
}

// ListResult is one page of a List.
type ListResult struct {
	// Items are in key order.
	Items []KeyValue
	// Revision is the revision the list was read at.
	Revision int64
	// Continue is the token for the next page, or empty when there is none.
	Continue string
}

// Store is the contract every backend implements. All methods are safe for
// concurrent use. A write returns only once it is durable.
type Store interface {
	// Create stores value under key at the next revision and returns it.
	// It fails with ErrAlreadyExists when key holds a document.
	Create(ctx context.Context, key string, value []byte) (int64, error)

	// Get returns the document under key.
	Get(ctx context.Context, key string, opts GetOptions) (*KeyValue, error)

	// List returns the documents whose keys start with prefix, in key order.
	List(ctx context.Context, prefix string, opts ListOptions) (*ListResult, error)

	// Update replaces the document under key and returns the new revision.
	// A non-zero expectedRevision must equal the document's ModRevision,
	// otherwise it fails with ErrConflict; 0 updates unconditionally. A missing
	// document gives ErrNotFound.
	Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error)

	// Delete removes the document under key and returns it as it was with the
	// revision of the delete. expectedRevision works as in Update.
	Delete(ctx context.Context, key string, expectedRevision int64) (*KeyValue, int64, error)

	// Watch sends every event on keys under prefix with a revision greater than
	// fromRevision: first those kept in history, then live ones, in revision
	// order, with no gaps and no duplicates. fromRevision 0 means the current
	// revision. A fromRevision older than history gives ErrCompacted.
	Watch(ctx context.Context, prefix string, fromRevision int64) (Watcher, error)

	// Compact discards history up to revision: reads at older revisions and
	// watches from them give ErrCompacted afterwards.
	Compact(ctx context.Context, revision int64) error

	// CurrentRevision returns the revision of the last committed write. A new
	// store starts at revision 1 (as etcd does), so a revision returned by a
	// read is never 0, which Watch takes as "now".
	CurrentRevision(ctx context.Context) (int64, error)

	// Close releases the store and waits for its goroutines. It is idempotent.
	Close() error
}

// DefaultWatchBuffer is how many events a watcher of either store may have
// waiting before it ends with ErrWatcherTooSlow, unless its options say
// otherwise: the whole backlog a slow HTTP watch client may have, since
// the API writes from the watch's goroutine and queues nothing more.
const DefaultWatchBuffer = 320

// Watcher is a running watch.
type Watcher interface {
	// Events delivers the events in revision order. It is closed when the
	// watch ends: after Stop, when the watch's context is done, when the store
	// closes, or when the watcher fell behind.
	Events() <-chan Event
	// Err tells why Events was closed: nil after Stop or a done context,
	// ErrWatcherTooSlow when the watcher fell behind (resume from the revision
	// of the last event received), ErrClosed when the store closed.
	// It is valid once Events is closed.
	Err() error
	// Progress returns a revision up to which every event of the watch has
	// been put in Events (received, or still waiting there), however long
	// ago its last event was: a consumer that takes what Events holds after
	// calling Progress has seen everything up to that revision, and can
	// resume from it (a bookmark). ok is false when the watcher cannot tell
	// (it is catching up, or behind).
	Progress() (rev int64, ok bool)
	// Stop ends the watch. It is idempotent.
	Stop()
}
