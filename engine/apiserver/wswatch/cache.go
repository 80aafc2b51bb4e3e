package wswatch

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// encodeCache shares encoded events between connections: every watcher of a
// kind receives the same event, and encoding it once instead of once per
// connection is most of wswatch's CPU under fan-out. An event is keyed by
// its type and its object's apiVersion, kind, namespace, name and
// resourceVersion, which together fix the encoded bytes. ERROR events,
// objects without a resourceVersion and annotated bookmarks (the end of the
// initial events) are not cached. Old entries are evicted first in, first
// out.
//
// In front of that, entries are also found by object pointer: the engine
// hands the same decoded object to every watch of the resource, so after
// the first connection the lookup costs one pointer hash instead of reading
// and hashing six strings. The cache holds the objects it keys, so a
// pointer cannot be reused for another object while its entry lives; the
// objects are read-only (the engine's Watch documents this).
type encodeCache struct {
	mu    sync.Mutex // guards m and byObj
	m     fifo[cacheKey]
	byObj fifo[objKey]
}

type objKey struct {
	typ watch.EventType
	obj *unstructured.Unstructured
}

type cacheKey struct {
	typ                                    watch.EventType
	apiVersion, kind, namespace, name, rev string
}

// newEncodeCache returns a cache of at most size events and maxBytes bytes
// of encoded events per index (an event found both ways counts once in
// each, but its bytes are shared).
func newEncodeCache(size, maxBytes int) *encodeCache {
	return &encodeCache{m: newFIFO[cacheKey](size, maxBytes), byObj: newFIFO[objKey](size, maxBytes)}
}

func keyOf(ev watch.Event) (cacheKey, bool) {
	if ev.Type == watch.Error || ev.Object == nil {
		return cacheKey{}, false
	}
	if u, ok := ev.Object.(*unstructured.Unstructured); ok {
		return unstructuredKey(ev.Type, u.Object)
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil || m.GetResourceVersion() == "" {
		return cacheKey{}, false
	}
	if ev.Type == watch.Bookmark && len(m.GetAnnotations()) > 0 {
		return cacheKey{}, false
	}
	gvk := ev.Object.GetObjectKind().GroupVersionKind()
	return cacheKey{
		typ: ev.Type, apiVersion: gvk.GroupVersion().String(), kind: gvk.Kind,
		namespace: m.GetNamespace(), name: m.GetName(), rev: m.GetResourceVersion(),
	}, true
}

// encode returns the cached encoding of ev, or encodes and caches it.
func (c *encodeCache) encode(ev watch.Event, enc func(watch.Event) ([]byte, error)) ([]byte, error) {
	var ok2 objKey
	if u, ok := ev.Object.(*unstructured.Unstructured); ok && u != nil && ev.Type != watch.Bookmark && ev.Type != watch.Error {
		ok2 = objKey{typ: ev.Type, obj: u}
		c.mu.Lock()
		b, hit := c.byObj.m[ok2]
		c.mu.Unlock()
		if hit {
			return b, nil
		}
	}
	k, ok := keyOf(ev)
	if !ok {
		return enc(ev)
	}
	c.mu.Lock()
	b, hit := c.m.m[k]
	if hit && ok2.obj != nil {
		c.byObj.add(ok2, b)
	}
	c.mu.Unlock()
	if hit {
		return b, nil
	}
	b, err := enc(ev)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if ok2.obj != nil {
		c.byObj.add(ok2, b)
	}
	c.m.add(k, b)
	c.mu.Unlock()
	return b, nil
}

// fifo is a map of encoded events bounded in entries and bytes, evicting the
// oldest first. Its user guards it.
type fifo[K comparable] struct {
	m              map[K][]byte
	ring           []K // the keys in insertion order, from head, n of them
	head, n        int
	bytes, maxSize int
}

func newFIFO[K comparable](size, maxBytes int) fifo[K] {
	return fifo[K]{m: make(map[K][]byte, size), ring: make([]K, size), maxSize: maxBytes}
}

// add records b under k unless k is there already; an encoding larger than
// the byte bound is not kept.
func (f *fifo[K]) add(k K, b []byte) {
	if _, dup := f.m[k]; dup || len(b) > f.maxSize || len(f.ring) == 0 {
		return
	}
	for f.n == len(f.ring) || f.bytes+len(b) > f.maxSize {
		old := f.ring[f.head]
		var zero K
		f.ring[f.head] = zero
		f.bytes -= len(f.m[old])
		delete(f.m, old)
		f.head = (f.head + 1) % len(f.ring)
		f.n--
	}
	f.ring[(f.head+f.n)%len(f.ring)] = k
	f.n++
	f.m[k] = b
	f.bytes += len(b)
}

// unstructuredKey reads the key straight from the object's map: the
// accessors of Unstructured parse apiVersion and copy maps, which costs more
// than the lookup saves on a busy fan-out.
func unstructuredKey(typ watch.EventType, obj map[string]any) (cacheKey, bool) {
	md, _ := obj["metadata"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	k := cacheKey{
		typ: typ, apiVersion: str(obj, "apiVersion"), kind: str(obj, "kind"),
		namespace: str(md, "namespace"), name: str(md, "name"), rev: str(md, "resourceVersion"),
	}
	if k.rev == "" {
		return cacheKey{}, false
	}
	if typ == watch.Bookmark {
		if a, _ := md["annotations"].(map[string]any); len(a) > 0 {
			return cacheKey{}, false
		}
	}
	return k, true
}
