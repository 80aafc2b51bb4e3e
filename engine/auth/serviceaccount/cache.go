package serviceaccount

import (
	"context"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Watcher lists and watches a resource; engine.Service implements it.
type Watcher interface {
	List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Watch(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// serviceAccounts is the resource Cache watches.
var serviceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}

// syncWait bounds how long UID waits for the first load.
const syncWait = 10 * time.Second

// Cache holds the UID of every ServiceAccount that exists and is not being
// deleted, kept current by a watch of ServiceAccounts: a token is checked
// against it without a store read, and a deleted ServiceAccount's tokens
// fail as soon as the watch delivers the deletion.
//
// Run owns the informer; mu guards what UID reads.
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

// Run keeps the cache current until ctx is done, with client-go's informer
// over the engine's list and watch (it resumes, relists after a 410 and
// backs off as every informer does); the cache counts as loaded once the
// informer has synced.
func (c *Cache) Run(ctx context.Context) error {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.w.List(ctx, serviceAccounts, "", opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.w.Watch(ctx, serviceAccounts, "", opts)
		},
	}
	_, ctl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &unstructured.Unstructured{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.put(obj) },
			UpdateFunc: func(_, obj any) { c.put(obj) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if u, ok := obj.(*unstructured.Unstructured); ok {
					c.mu.Lock()
					delete(c.uids, u.GetNamespace()+"/"+u.GetName())
					c.mu.Unlock()
				}
			},
		},
	})
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), ctl.HasSynced) {
			c.once.Do(func() { close(c.synced) })
		}
	}()
	ctl.RunWithContext(ctx)
	return nil
}

// put records the ServiceAccount obj: its UID while it is not being
// deleted, none once it is.
func (c *Cache) put(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	key := u.GetNamespace() + "/" + u.GetName()
	c.mu.Lock()
	defer c.mu.Unlock()
	if u.GetDeletionTimestamp() == nil {
		c.uids[key] = string(u.GetUID())
	} else {
		delete(c.uids, key)
	}
}
