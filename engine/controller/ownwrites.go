package controller

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ownWrites remembers, per key, the resourceVersion of the controller's last
// write of an object of its kind until the cache has seen that write. A
// cached object older than it is stale: a reconcile must not compare its
// result with the cached status, since the store holds a newer one whose
// event (a status-only change) triggers no reconcile. See docs/RATIONALE.md,
// "What does the controller do when its cache lags its own write?".
//
// An entry is forgotten when the cache reaches the written resourceVersion
// or drops the object, so there is at most one per cached object and none in
// steady state.
type ownWrites struct {
	mu sync.Mutex
	rv map[Key]string // guarded by mu
}

func newOwnWrites() *ownWrites { return &ownWrites{rv: make(map[Key]string)} }

// wrote records that the controller wrote the object under key, which now
// has resourceVersion rv.
func (w *ownWrites) wrote(key Key, rv string) {
	if rv == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.rv[key]; ok && !olderRV(prev, rv) {
		return
	}
	w.rv[key] = rv
}

// stale reports whether a cached object under key with resourceVersion
// cached predates the controller's last write of it. When it does not, the
// key is forgotten.
func (w *ownWrites) stale(key Key, cached string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	written, ok := w.rv[key]
	if !ok {
		return false
	}
	if olderRV(cached, written) {
		return true
	}
	delete(w.rv, key)
	return false
}

// fromCache reads the object under key from the cache with get and
// reports whether the copy predates the controller's last write of it.
//
// The write is looked up before the cache is read, not after: the cache's
// handler forgets it once the cache holds it (Controller.onPrimary), and
// may do so just after get returned the copy from before. Looked up after,
// the write would be gone and that copy taken for current; the reconcile
// would then compare its status with one the store no longer holds and
// skip the write that puts it right, with nothing left to trigger another.
// No write of key is recorded between the two reads: only a reconcile of
// key records one, and a key is reconciled by one worker at a time.
func (w *ownWrites) fromCache(key Key, get func(Key) (*unstructured.Unstructured, bool)) (obj *unstructured.Unstructured, ok, stale bool) {
	w.mu.Lock()
	written, pending := w.rv[key]
	w.mu.Unlock()
	obj, ok = get(key)
	if !ok {
		return nil, false, false
	}
	if !pending {
		return obj, true, false
	}
	if olderRV(obj.GetResourceVersion(), written) {
		return obj, true, true
	}
	return obj, true, w.stale(key, obj.GetResourceVersion()) // forgets the write the copy has
}

// forget drops what is known of key: the object is gone.
func (w *ownWrites) forget(key Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, key)
}

// retain forgets every key for which keep returns false.
func (w *ownWrites) retain(keep func(Key) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.rv {
		if !keep(k) {
			delete(w.rv, k)
		}
	}
}

// len returns how many keys are remembered.
func (w *ownWrites) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.rv)
}

// olderRV reports whether resourceVersion a is older than b. The engine's
// resourceVersions are store revisions in decimal; one that is not is only
// known to differ, and is taken as older so that the reconcile reads afresh.
func olderRV(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return x < y
}
