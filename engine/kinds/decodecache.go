package kinds

import (
	"bytes"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/store"
)

// decodeCacheSize is how many decoded documents the watch decode cache keeps.
// Watches of the same resource see the same store events at about the same
// time, so a small window serves all of them; a watch that lags further
// behind decodes for itself.
const decodeCacheSize = 1024

// decodeCacheMaxDoc is the largest stored document the cache keeps, which
// bounds its memory (1,024 documents of at most 32 KiB, and their decoded
// forms). Larger documents are decoded by each watch. That also paces a
// watch replaying a backlog of large events: wswatch closes a connection
// whose queue passes 4 MiB, and without the per-watch decode a resumed
// WebSocket watch of 1 MiB objects fills it faster than it can write.
const decodeCacheMaxDoc = 32 << 10

// DecodeCache decodes each stored document once for all the watches of a
// served resource version. Entries are keyed by resource version, store key
// and revision, and checked against the stored bytes, so a hit is always the
// decode of the very document asked for.
//
// The objects it returns are shared between watches and must not be
// modified; Watch documents this for its callers.
type DecodeCache struct {
	mu      sync.Mutex // guards entries, ring and next
	entries map[decodeKey]*decoded
	ring    [decodeCacheSize]decodeKey
	next    int
}

type decodeKey struct {
	sv  *Kind
	key string
	rev int64
}

// decoded is one cache entry; once guards obj and err, which are set by the
// first watch that needs them, outside the cache's lock.
type decoded struct {
	raw  []byte
	once sync.Once
	obj  *unstructured.Unstructured
	err  error
}

// NewDecodeCache returns an empty cache.
func NewDecodeCache() *DecodeCache {
	return &DecodeCache{entries: make(map[decodeKey]*decoded, decodeCacheSize)}
}

// Decode returns sv.decodeWritten(kv, written), shared with every other
// watch that asks for the same document while it is in the cache.
func (c *DecodeCache) Decode(sv *Kind, kv *store.KeyValue, written int64) (*unstructured.Unstructured, error) {
	if len(kv.Value) > decodeCacheMaxDoc {
		return sv.decodeWritten(kv, written)
	}
	k := decodeKey{sv: sv, key: kv.Key, rev: kv.ModRevision}
	c.mu.Lock()
	e, ok := c.entries[k]
	if ok && !bytes.Equal(e.raw, kv.Value) {
		// Another document under the same key and revision (a store
		// recreated underneath): do not share.
		c.mu.Unlock()
		return sv.decodeWritten(kv, written)
	}
	if !ok {
		e = &decoded{raw: kv.Value}
		if old := c.ring[c.next]; old.sv != nil {
			delete(c.entries, old)
		}
		c.ring[c.next] = k
		c.next = (c.next + 1) % decodeCacheSize
		c.entries[k] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.obj, e.err = sv.decodeWritten(kv, written) })
	return e.obj, e.err
}
