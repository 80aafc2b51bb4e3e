package store

// EventType says what a write did to a document.
type EventType int

// The event types.
const (
	// Added: the document was created.
	Added EventType = iota + 1
	// Modified: the document was updated.
	Modified
	// Deleted: the document was deleted.
	Deleted
)

func (t EventType) String() string {
	switch t {
	case Added:
		return "ADDED"
	case Modified:
		return "MODIFIED"
	case Deleted:
		return "DELETED"
	}
	return "UNKNOWN"
}

// Event is one committed write seen by a watcher.
type Event struct {
	Type EventType
	// Object is the document after the write. For Deleted it is the document
	// as it was before the delete, with ModRevision set to the delete's
	// revision.
	Object KeyValue
	// Prev is the document before the write, for Modified and Deleted.
	Prev *KeyValue
}

// Revision is the revision of the write.
func (e Event) Revision() int64 { return e.Object.ModRevision }
