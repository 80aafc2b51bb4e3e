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
type encodeCache struct {
	mu   sync.Mutex // guards m, ring, next
	m    map[cacheKey][]byte
	ring []cacheKey
	next int
}

type cacheKey struct {
	typ                                    watch.EventType
	apiVersion, kind, namespace, name, rev string
}

func newEncodeCache(size int) *encodeCache {
	return &encodeCache{m: make(map[cacheKey][]byte, size), ring: make([]cacheKey, size)}
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
	k, ok := keyOf(ev)
	if !ok {
		return enc(ev)
	}
	c.mu.Lock()
	b, hit := c.m[k]
	c.mu.Unlock()
	if hit {
		return b, nil
	}
	b, err := enc(ev)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if _, dup := c.m[k]; !dup {
		if old := c.ring[c.next]; old != (cacheKey{}) {
			delete(c.m, old)
		}
		c.ring[c.next] = k
		c.next = (c.next + 1) % len(c.ring)
		c.m[k] = b
	}
	c.mu.Unlock()
	return b, nil
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
