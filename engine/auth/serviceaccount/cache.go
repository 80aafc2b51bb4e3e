package serviceaccount

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// Watcher opens a watch of a resource; engine.Service implements it.
type Watcher interface {
	Watch(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// serviceAccounts is the resource Cache watches.
var serviceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}

// initialEventsEnd is the annotation of the bookmark that ends a watch's
// initial events.
const initialEventsEnd = metav1.InitialEventsAnnotationKey

// Cache delay bounds: how long UID waits for the first load, and the retry
// delays after a failed watch.
const (
	syncWait   = 10 * time.Second
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
)

// Cache holds the UID of every ServiceAccount that exists and is not being
// deleted, kept current by a watch of ServiceAccounts: a token is checked
// against it without a store read, and a deleted ServiceAccount's tokens
// fail as soon as the watch delivers the deletion.
//
// Run's goroutine owns the watch; mu guards what UID reads.
type Cache struct {
	w   Watcher
	log *slog.Logger

	mu     sync.RWMutex      // guards uids
	uids   map[string]string // namespace/name -> UID
	synced chan struct{}     // closed after the first complete load
	once   sync.Once
}

var _ Accounts = (*Cache)(nil)

// NewCache returns a Cache over w; it loads once Run runs.
func NewCache(w Watcher, log *slog.Logger) *Cache {
	if log == nil {
		log = slog.Default()
	}
	return &Cache{w: w, log: log, uids: map[string]string{}, synced: make(chan struct{})}
}

// Synced is closed once the cache has loaded every ServiceAccount.
func (c *Cache) Synced() <-chan struct{} { return c.synced }

// UID returns the UID of the ServiceAccount namespace/name. Before the first
// load it waits for it, within ctx and at most syncWait.
func (c *Cache) UID(ctx context.Context, namespace, name string) (string, bool, error) {
	select {
	case <-c.synced:
	default:
		t := time.NewTimer(syncWait)
		defer t.Stop()
		select {
		case <-c.synced:
		case <-ctx.Done():
			return "", false, ErrNotSynced
		case <-t.C:
			return "", false, ErrNotSynced
		}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	uid, ok := c.uids[namespace+"/"+name]
	return uid, ok, nil
}

// Run keeps the cache current until ctx is done: one watch that sends every
// ServiceAccount, then their changes; resumed from its last revision when it
// ends, started over (a full load) when that revision is too old.
func (c *Cache) Run(ctx context.Context) error {
	rv := ""
	delay := retryFirst
	for ctx.Err() == nil {
		next, err := c.watchOnce(ctx, rv)
		if ctx.Err() != nil {
			return nil
		}
		progressed := next != rv
		rv = next
		if err == nil && progressed {
			delay = retryFirst
			continue
		}
		// A failed watch, or one that ended without a change: wait.
		if err != nil {
			c.log.Warn("watch ServiceAccounts", "err", err, "retry_in", delay)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, retryMax)
	}
	return nil
}

// watchOnce watches from rv ("" for a full load first) until the watch
// ends, and returns the revision to resume from ("" to load again).
func (c *Cache) watchOnce(ctx context.Context, rv string) (string, error) {
	opts := metav1.ListOptions{AllowWatchBookmarks: true, ResourceVersion: rv}
	var fresh map[string]string // the full load, until its end
	if rv == "" {
		opts.SendInitialEvents = ptr.To(true)
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
		fresh = map[string]string{}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := c.w.Watch(ctx, serviceAccounts, "", opts)
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return "", err
		}
		return rv, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			if st, ok := ev.Object.(*metav1.Status); ok && st.Code == http.StatusGone {
				return "", nil // too old: load again
			}
			return rv, errors.New("the watch sent an error")
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if ev.Type == watch.Bookmark {
			if fresh != nil && u.GetAnnotations()[initialEventsEnd] == "true" {
				c.mu.Lock()
				c.uids = fresh
				c.mu.Unlock()
				fresh = nil
				c.once.Do(func() { close(c.synced) })
			}
		} else {
			c.apply(fresh, ev.Type, u)
		}
		if v := u.GetResourceVersion(); v != "" && fresh == nil {
			rv = v
		}
	}
	return rv, nil
}

// apply records one change in into, or, when into is nil, in the cache.
func (c *Cache) apply(into map[string]string, t watch.EventType, u *unstructured.Unstructured) {
	key := u.GetNamespace() + "/" + u.GetName()
	live := t != watch.Deleted && u.GetDeletionTimestamp() == nil
	if into == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		into = c.uids
	}
	if live {
		into[key] = string(u.GetUID())
	} else {
		delete(into, key)
	}
}
