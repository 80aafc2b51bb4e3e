// Package controllertest holds an in-memory object service for testing
// controllers without a store: Client keeps objects per resource, assigns
// resourceVersions from one counter, enforces compare-and-swap, bumps
// generation on spec changes, honours finalizers and deletionTimestamp,
// collects children by controller ownerReference, and serves watches with
// history and 410 Expired. It implements controller.Client and is a stand-in
// for the engine's object service, not a replacement: tests that can should
// use the real one on a real store.
package controllertest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/controller"
)

// Client is an in-memory object service. The zero value is not usable; call
// New.
type Client struct {
	// Fail, when set, is called before each operation; a non-nil error is
	// returned instead of performing it. verb is get, list, watch, create,
	// update, updateStatus or delete.
	Fail func(verb string, gvr schema.GroupVersionResource, namespace, name string) error

	// mu guards everything below; watchers take their own lock after it.
	mu        sync.Mutex
	rv        int64
	uid       int64
	objects   map[schema.GroupVersionResource]map[controller.Key]*unstructured.Unstructured
	history   []change
	compacted int64
	watchers  map[*watcher]struct{}
	watches   int
	writes    map[string]int
}

type change struct {
	gvr schema.GroupVersionResource
	typ watch.EventType
	obj *unstructured.Unstructured
	rv  int64
}

var _ controller.Client = (*Client)(nil)

// New returns an empty Client.
func New() *Client {
	return &Client{
		objects:  make(map[schema.GroupVersionResource]map[controller.Key]*unstructured.Unstructured),
		watchers: make(map[*watcher]struct{}),
		writes:   make(map[string]int),
	}
}

// Writes returns how many writes of verb succeeded on resource ("create",
// "update", "updateStatus", "delete").
func (c *Client) Writes(verb, resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes[verb+" "+resource]
}

// Compact drops the history and ends every watch with 410 Expired, as a
// store that compacted would.
func (c *Client) Compact() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = nil
	c.compacted = c.rv
	for w := range c.watchers {
		w.expire()
		delete(c.watchers, w)
	}
}

// EndWatches ends every watch without an error, as a server closing its
// streams would; clients resume from their last resourceVersion.
func (c *Client) EndWatches() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.watchers {
		w.cancel()
	}
}

// Watches returns how many watches were started.
func (c *Client) Watches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watches
}

func (c *Client) fail(verb string, gvr schema.GroupVersionResource, ns, name string) error {
	if c.Fail == nil {
		return nil
	}
	return c.Fail(verb, gvr, ns, name)
}

func (c *Client) bucket(gvr schema.GroupVersionResource) map[controller.Key]*unstructured.Unstructured {
	b := c.objects[gvr]
	if b == nil {
		b = make(map[controller.Key]*unstructured.Unstructured)
		c.objects[gvr] = b
	}
	return b
}

// Get implements controller.Client.
func (c *Client) Get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, _ metav1.GetOptions) (*unstructured.Unstructured, error) {
	if err := c.fail("get", gvr, namespace, name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.bucket(gvr)[controller.Key{Namespace: namespace, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	return o.DeepCopy(), nil
}

// List implements controller.Client; it ignores selectors and limits.
func (c *Client) List(_ context.Context, gvr schema.GroupVersionResource, namespace string, _ metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if err := c.fail("list", gvr, namespace, ""); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := &unstructured.UnstructuredList{}
	b := c.bucket(gvr)
	keys := slices.SortedFunc(maps.Keys(b), func(a, b controller.Key) int {
		return compareKeys(a, b)
	})
	for _, k := range keys {
		if namespace == "" || k.Namespace == namespace {
			out.Items = append(out.Items, *b[k].DeepCopy())
		}
	}
	out.SetResourceVersion(strconv.FormatInt(c.rv, 10))
	return out, nil
}

func compareKeys(a, b controller.Key) int {
	if a.Namespace != b.Namespace {
		if a.Namespace < b.Namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// Create implements controller.Client.
func (c *Client) Create(_ context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, _ metav1.CreateOptions) (*unstructured.Unstructured, error) {
	if err := c.fail("create", gvr, obj.GetNamespace(), obj.GetName()); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := controller.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if obj.GetName() == "" {
		return nil, apierrors.NewBadRequest("metadata.name is required")
	}
	b := c.bucket(gvr)
	if _, ok := b[k]; ok {
		return nil, apierrors.NewAlreadyExists(gvr.GroupResource(), obj.GetName())
	}
	o := obj.DeepCopy()
	c.uid++
	o.SetUID(types.UID(fmt.Sprintf("uid-%d", c.uid)))
	o.SetGeneration(1)
	o.SetCreationTimestamp(metav1.Now())
	o.SetDeletionTimestamp(nil)
	c.commitLocked(gvr, watch.Added, o)
	return o.DeepCopy(), nil
}

// Update implements controller.Client: status is kept, generation bumps when
// anything but metadata and status changed.
func (c *Client) Update(_ context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, _ metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return c.update(gvr, obj, false)
}

// UpdateStatus implements controller.Client: only status changes.
func (c *Client) UpdateStatus(_ context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, _ metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return c.update(gvr, obj, true)
}

func (c *Client) update(gvr schema.GroupVersionResource, obj *unstructured.Unstructured, status bool) (*unstructured.Unstructured, error) {
	verb := "update"
	if status {
		verb = "updateStatus"
	}
	if err := c.fail(verb, gvr, obj.GetNamespace(), obj.GetName()); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := controller.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	cur, ok := c.bucket(gvr)[k]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), obj.GetName())
	}
	if rv := obj.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
		return nil, apierrors.NewConflict(gvr.GroupResource(), obj.GetName(),
			fmt.Errorf("resourceVersion %s is not the current %s", rv, cur.GetResourceVersion()))
	}
	var o *unstructured.Unstructured
	if status {
		o = cur.DeepCopy()
		if s, ok := obj.Object["status"]; ok {
			o.Object["status"] = runtimeCopy(s)
		} else {
			delete(o.Object, "status")
		}
	} else {
		o = obj.DeepCopy()
		if s, ok := cur.Object["status"]; ok {
			o.Object["status"] = runtimeCopy(s)
		} else {
			delete(o.Object, "status")
		}
		o.SetUID(cur.GetUID())
		o.SetCreationTimestamp(cur.GetCreationTimestamp())
		o.SetDeletionTimestamp(cur.GetDeletionTimestamp())
		o.SetGeneration(cur.GetGeneration())
		if specChanged(cur, o) {
			o.SetGeneration(cur.GetGeneration() + 1)
		}
		if o.GetDeletionTimestamp() != nil && len(o.GetFinalizers()) == 0 {
			c.removeLocked(gvr, k, cur)
			return o, nil
		}
	}
	c.commitLocked(gvr, watch.Modified, o)
	c.writes[verb+" "+gvr.Resource]++
	return o.DeepCopy(), nil
}

func specChanged(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			if k != "metadata" && k != "status" {
				m[k] = v
			}
		}
		return m
	}
	x, y := &unstructured.Unstructured{Object: strip(a)}, &unstructured.Unstructured{Object: strip(b)}
	bx, _ := x.MarshalJSON()
	by, _ := y.MarshalJSON()
	return string(bx) != string(by)
}

func runtimeCopy(v any) any {
	u := &unstructured.Unstructured{Object: map[string]any{"v": v}}
	return u.DeepCopy().Object["v"]
}

// Delete implements controller.Client: an object with finalizers gets a
// deletionTimestamp; without, it is removed and its dependents collected.
func (c *Client) Delete(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	if err := c.fail("delete", gvr, namespace, name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := controller.Key{Namespace: namespace, Name: name}
	cur, ok := c.bucket(gvr)[k]
	if !ok {
		return apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != cur.GetUID() || p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
			return apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf("precondition failed"))
		}
	}
	c.writes["delete "+gvr.Resource]++
	if len(cur.GetFinalizers()) > 0 {
		if cur.GetDeletionTimestamp() != nil {
			return nil
		}
		o := cur.DeepCopy()
		now := metav1.Now()
		o.SetDeletionTimestamp(&now)
		o.SetGeneration(o.GetGeneration() + 1)
		c.commitLocked(gvr, watch.Modified, o)
		return nil
	}
	c.removeLocked(gvr, k, cur)
	return nil
}

// removeLocked deletes an object and, in the background as Kubernetes does
// by default, every object it controls.
func (c *Client) removeLocked(gvr schema.GroupVersionResource, k controller.Key, cur *unstructured.Unstructured) {
	delete(c.bucket(gvr), k)
	c.commitLocked(gvr, watch.Deleted, cur.DeepCopy())
	uid := cur.GetUID()
	for dgvr, b := range c.objects {
		for dk, d := range b {
			for _, r := range d.GetOwnerReferences() {
				if r.UID == uid {
					if len(d.GetFinalizers()) > 0 {
						if d.GetDeletionTimestamp() == nil {
							o := d.DeepCopy()
							now := metav1.Now()
							o.SetDeletionTimestamp(&now)
							c.commitLocked(dgvr, watch.Modified, o)
						}
					} else {
						c.removeLocked(dgvr, dk, d)
					}
					break
				}
			}
		}
	}
}

// commitLocked stores o (unless it is a delete) at the next resourceVersion
// and tells the watchers.
func (c *Client) commitLocked(gvr schema.GroupVersionResource, typ watch.EventType, o *unstructured.Unstructured) {
	c.rv++
	o.SetResourceVersion(strconv.FormatInt(c.rv, 10))
	if typ != watch.Deleted {
		c.bucket(gvr)[controller.Key{Namespace: o.GetNamespace(), Name: o.GetName()}] = o
		if typ == watch.Added {
			c.writes["create "+gvr.Resource]++
		}
	}
	ch := change{gvr: gvr, typ: typ, obj: o.DeepCopy(), rv: c.rv}
	c.history = append(c.history, ch)
	for w := range c.watchers {
		w.offer(ch)
	}
}

// Watch implements controller.Client. From resourceVersion N it replays the
// changes after N; "" or "0" means from now.
func (c *Client) Watch(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	if err := c.fail("watch", gvr, namespace, ""); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	from := c.rv
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		n, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid resourceVersion")
		}
		if n < c.compacted {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %d is compacted", n))
		}
		from = n
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{gvr: gvr, namespace: namespace, ch: make(chan watch.Event), cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	for _, ch := range c.history {
		if ch.rv > from {
			w.offer(ch)
		}
	}
	c.watchers[w] = struct{}{}
	c.watches++
	go func() {
		w.pump(ctx)
		c.mu.Lock()
		delete(c.watchers, w)
		c.mu.Unlock()
	}()
	return w, nil
}

// watcher is one Watch. Its goroutine (pump) forwards pending changes to the
// result channel until the watch is stopped, expired or ctx is done.
type watcher struct {
	gvr       schema.GroupVersionResource
	namespace string
	ch        chan watch.Event
	cancel    context.CancelFunc
	done      chan struct{}
	wake      chan struct{}

	mu      sync.Mutex // guards pending and expired
	pending []watch.Event
	expired bool
}

func (w *watcher) offer(ch change) {
	if ch.gvr != w.gvr || (w.namespace != "" && ch.obj.GetNamespace() != w.namespace) {
		return
	}
	w.mu.Lock()
	w.pending = append(w.pending, watch.Event{Type: ch.typ, Object: ch.obj.DeepCopy()})
	w.mu.Unlock()
	w.poke()
}

func (w *watcher) expire() {
	w.mu.Lock()
	w.expired = true
	w.mu.Unlock()
	w.poke()
}

func (w *watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) pump(ctx context.Context) {
	defer close(w.done)
	defer close(w.ch)
	for {
		w.mu.Lock()
		batch, expired := w.pending, w.expired
		w.pending = nil
		w.mu.Unlock()
		if expired {
			st := apierrors.NewResourceExpired("watch expired").Status()
			select {
			case w.ch <- watch.Event{Type: watch.Error, Object: &st}:
			case <-ctx.Done():
			}
			return
		}
		for _, ev := range batch {
			select {
			case w.ch <- ev:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
	}
}

// ResultChan implements watch.Interface.
func (w *watcher) ResultChan() <-chan watch.Event { return w.ch }

// Stop implements watch.Interface; it waits for the watch's goroutine.
func (w *watcher) Stop() {
	w.cancel()
	<-w.done
}
