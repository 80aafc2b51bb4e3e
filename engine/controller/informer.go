package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// listPageSize bounds the pages of an informer's list.
const listPageSize = 500

// Informer retry delays after a failed list or watch.
const (
	informerBaseDelay = 100 * time.Millisecond
	informerMaxDelay  = 30 * time.Second
)

// informer is the cache of one kind: it lists the kind, then watches it from
// the list's resourceVersion, resuming the watch where it ended and listing
// again when the resourceVersion has expired (410). Objects in it are shared:
// callers must not modify them. Several controllers may use one informer
// (see sharedInformers), each with a handler of its own.
type informer struct {
	kind      Kind
	client    Reader
	namespace string
	log       *slog.Logger

	// hmu guards handlers and is held while they are called, so that a
	// handler registered meanwhile sees every change after its replay. Lock
	// order: hmu before mu.
	hmu      sync.Mutex
	handlers map[*handler]struct{}

	// mu guards the fields below.
	mu      sync.RWMutex
	objects map[Key]*unstructured.Unstructured
	// byOwner indexes objects by the UID of their controller.
	byOwner map[types.UID]map[Key]struct{}
	rv      string
	synced  chan struct{} // closed after the first list
	once    sync.Once
}

// handler is told of every change of an informer's objects: old is nil for
// a new object, cur is nil for a deleted one. Handlers are called one after
// the other on the informer's goroutine, so a handler must not block (the
// controllers' handlers only add to their queue): a slow one would hold up
// every other controller using the informer.
type handler struct {
	fn func(old, cur *unstructured.Unstructured)
}

func newInformer(kind Kind, client Reader, namespace string, log *slog.Logger) *informer {
	return &informer{
		kind:      kind,
		client:    client,
		namespace: namespace,
		log:       log.With("resource", kind.Resource.String()),
		handlers:  make(map[*handler]struct{}),
		objects:   make(map[Key]*unstructured.Unstructured),
		byOwner:   make(map[types.UID]map[Key]struct{}),
		synced:    make(chan struct{}),
	}
}

// register adds fn as a handler and calls it at once with every cached
// object as new. It returns the function that removes the handler; fn is
// not called after that returns.
func (i *informer) register(fn func(old, cur *unstructured.Unstructured)) (unregister func()) {
	h := &handler{fn: fn}
	i.hmu.Lock()
	i.mu.RLock()
	objs := make([]*unstructured.Unstructured, 0, len(i.objects))
	for _, o := range i.objects {
		objs = append(objs, o)
	}
	i.mu.RUnlock()
	i.handlers[h] = struct{}{}
	for _, o := range objs {
		fn(nil, o)
	}
	i.hmu.Unlock()
	return func() {
		i.hmu.Lock()
		delete(i.handlers, h)
		i.hmu.Unlock()
	}
}

// notify calls every handler with each change, in order.
func (i *informer) notify(changes ...change) {
	if len(changes) == 0 {
		return
	}
	i.hmu.Lock()
	defer i.hmu.Unlock()
	for _, c := range changes {
		for h := range i.handlers {
			h.fn(c.old, c.cur)
		}
	}
}

// change is one change of a cached object, as handlers see it.
type change struct{ old, cur *unstructured.Unstructured }

// get returns the cached object under key.
func (i *informer) get(key Key) (*unstructured.Unstructured, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	o, ok := i.objects[key]
	return o, ok
}

// keys returns the keys of every cached object.
func (i *informer) keys() []Key {
	i.mu.RLock()
	defer i.mu.RUnlock()
	out := make([]Key, 0, len(i.objects))
	for k := range i.objects {
		out = append(out, k)
	}
	return out
}

// controlledBy returns the cached objects whose controller is owner.
func (i *informer) controlledBy(owner types.UID) []*unstructured.Unstructured {
	i.mu.RLock()
	defer i.mu.RUnlock()
	keys := i.byOwner[owner]
	out := make([]*unstructured.Unstructured, 0, len(keys))
	for k := range keys {
		out = append(out, i.objects[k])
	}
	return out
}

// run fills the cache and keeps it current until ctx is done.
func (i *informer) run(ctx context.Context) {
	delay := informerBaseDelay
	needList := true
	for ctx.Err() == nil {
		var err error
		if needList {
			err = i.relist(ctx)
			if err == nil {
				needList = false
			}
		} else {
			var progressed bool
			progressed, err = i.watch(ctx)
			if progressed {
				delay = informerBaseDelay
			}
			if isExpired(err) {
				i.log.Info("watch expired, listing again", "rv", i.resourceVersion())
				needList = true
				continue
			}
			if err == nil && !progressed && ctx.Err() == nil {
				// Ended at once with nothing: do not spin on a server that
				// closes watches immediately.
				err = errors.New("watch ended without events")
			}
		}
		if err == nil {
			delay = informerBaseDelay
			continue
		}
		if ctx.Err() != nil {
			return
		}
		i.log.Warn("informer retrying", "err", err, "delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(delay*2, informerMaxDelay)
	}
}

func (i *informer) resourceVersion() string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.rv
}

// isExpired reports whether err means the resourceVersion is too old.
func isExpired(err error) bool {
	if err == nil {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code == 410 {
		return true
	}
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// relist replaces the cache with a fresh list, reporting the differences.
func (i *informer) relist(ctx context.Context) error {
	fresh := make(map[Key]*unstructured.Unstructured)
	opts := metav1.ListOptions{Limit: listPageSize}
	var rv string
	for {
		list, err := i.client.List(ctx, i.kind.Resource, i.namespace, opts)
		if err != nil {
			if isExpired(err) && opts.Continue != "" {
				// The snapshot of the first page expired: start over.
				fresh = make(map[Key]*unstructured.Unstructured)
				opts.Continue = ""
				continue
			}
			return fmt.Errorf("list %s: %w", i.kind.Resource, err)
		}
		for j := range list.Items {
			o := &list.Items[j]
			fresh[Key{o.GetNamespace(), o.GetName()}] = o
		}
		if rv == "" {
			rv = list.GetResourceVersion()
		}
		if list.GetContinue() == "" {
			break
		}
		opts.Continue = list.GetContinue()
	}
	var changes []change
	i.mu.Lock()
	for k, old := range i.objects {
		if _, ok := fresh[k]; !ok {
			i.removeLocked(k, old)
			changes = append(changes, change{old, nil})
		}
	}
	for k, cur := range fresh {
		old := i.objects[k]
		if old != nil && old.GetResourceVersion() == cur.GetResourceVersion() {
			continue
		}
		i.putLocked(k, old, cur)
		changes = append(changes, change{old, cur})
	}
	i.rv = rv
	i.mu.Unlock()
	i.notify(changes...)
	// After the handlers: a controller that sees synced has its queue full.
	i.once.Do(func() { close(i.synced) })
	return nil
}

// watch follows the kind from the cached resourceVersion until the watch
// ends. progressed tells whether it received anything.
func (i *informer) watch(ctx context.Context) (progressed bool, err error) {
	w, err := i.client.Watch(ctx, i.kind.Resource, i.namespace, metav1.ListOptions{
		ResourceVersion:     i.resourceVersion(),
		AllowWatchBookmarks: true,
	})
	if err != nil {
		return false, fmt.Errorf("watch %s: %w", i.kind.Resource, err)
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return progressed, nil
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return progressed, nil // ended: resume from the last resourceVersion
		}
		progressed = true
		switch ev.Type {
		case watch.Error:
			return progressed, fmt.Errorf("watch %s: %w", i.kind.Resource, statusError(ev.Object))
		case watch.Bookmark:
			if m, err := metaOf(ev.Object); err == nil {
				i.mu.Lock()
				i.rv = m.GetResourceVersion()
				i.mu.Unlock()
			}
		case watch.Added, watch.Modified, watch.Deleted:
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				return progressed, fmt.Errorf("watch %s: unexpected object %T", i.kind.Resource, ev.Object)
			}
			i.apply(ev.Type, u)
		}
	}
}

func (i *informer) apply(t watch.EventType, u *unstructured.Unstructured) {
	k := Key{u.GetNamespace(), u.GetName()}
	i.mu.Lock()
	old := i.objects[k]
	if t == watch.Deleted {
		if old != nil {
			i.removeLocked(k, old)
		}
	} else {
		i.putLocked(k, old, u)
	}
	i.rv = u.GetResourceVersion()
	i.mu.Unlock()
	if t == watch.Deleted {
		if old == nil {
			old = u
		}
		i.notify(change{old, nil})
		return
	}
	i.notify(change{old, u})
}

func (i *informer) putLocked(k Key, old, cur *unstructured.Unstructured) {
	if old != nil {
		i.unindexLocked(k, old)
	}
	i.objects[k] = cur
	if ref, ok := controllerOf(cur); ok {
		set := i.byOwner[ref.UID]
		if set == nil {
			set = make(map[Key]struct{})
			i.byOwner[ref.UID] = set
		}
		set[k] = struct{}{}
	}
}

func (i *informer) removeLocked(k Key, old *unstructured.Unstructured) {
	i.unindexLocked(k, old)
	delete(i.objects, k)
}

func (i *informer) unindexLocked(k Key, old *unstructured.Unstructured) {
	if ref, ok := controllerOf(old); ok {
		if set := i.byOwner[ref.UID]; set != nil {
			delete(set, k)
			if len(set) == 0 {
				delete(i.byOwner, ref.UID)
			}
		}
	}
}

// statusError turns the object of a watch ERROR event into an error.
func statusError(obj runtime.Object) error {
	switch s := obj.(type) {
	case *metav1.Status:
		return apierrors.FromObject(s)
	case *unstructured.Unstructured:
		var st metav1.Status
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s.Object, &st); err == nil {
			return apierrors.FromObject(&st)
		}
	}
	return errors.New("watch error")
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	if m, ok := obj.(metav1.Object); ok {
		return m, nil
	}
	return nil, fmt.Errorf("no metadata in %T", obj)
}
