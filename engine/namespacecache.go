package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// namespaceLiveLookup is how long after this server admits a namespace's
// deletion creates in it read the namespace from the store whatever the
// cache says, as Kubernetes' NamespaceLifecycle admission does for the same
// time (forceLiveLookupTTL) in case its informer is slow to see the change.
const namespaceLiveLookup = 30 * time.Second

var namespacePrefix = store.ResourcePrefix("", kinds.NamespaceResource.Resource, "")

// namespaceCache knows which namespaces are active (stored without a
// deletionTimestamp) so that a create need not read its namespace from the
// store: Kubernetes' NamespaceLifecycle admission answers from an informer's
// cache in the same way. It is fed by a watch of the namespaces
// (followNamespaces, while Run runs) and only ever answers "active"; a
// namespace it does not know as active, a terminating one included, is
// read from the store, so that one just created (its event not yet seen) is
// found, and one deleted and created again is not refused from an old
// entry. Without a running watch it answers nothing.
//
// A namespace that stops being active stops being answered from the cache
// as soon as this server learns of it: at once when the deletion goes
// through this server (the deleting hook asks for store reads for
// namespaceLiveLookup, and the committed hook marks it inactive), and when
// its watch event arrives when it goes through another server sharing the
// store, the lag Kubernetes' informer has too.
type namespaceCache struct {
	mu sync.RWMutex
	// synced is set while the watch feeding entries runs, from a list taken
	// just before it.
	synced bool
	// entries holds the last state seen of each namespace and the revision
	// of the write that gave it. An inactive entry comes from a watch event
	// or from this server's own write (markInactive), whichever is newer. A
	// deleted namespace has none: the watch's Deleted event removes it, and
	// markInactive adds none the watch has delivered already (seen), so
	// entries do not grow with namespaces created and deleted.
	entries map[string]namespaceEntry
	// seen is the revision the watch has delivered up to: that of the list
	// at reset, then that of each event.
	seen int64
	// live holds the namespaces read from the store, whatever entries say,
	// until the time each maps to; lookLive drops those past their time.
	live map[string]time.Time
}

type namespaceEntry struct {
	rev    int64
	active bool
}

// active reports whether ns is known to be active at now: a create in it
// need not read it from the store.
func (c *namespaceCache) active(ns string, now time.Time) bool {
	c.mu.RLock()
	e, ok := c.entries[ns]
	ok = ok && c.synced && e.active
	var until time.Time
	if ok && len(c.live) > 0 {
		until = c.live[ns]
	}
	c.mu.RUnlock()
	if !ok {
		return false
	}
	if until.IsZero() {
		return true
	}
	if now.Before(until) {
		return false
	}
	c.mu.Lock()
	if t, ok := c.live[ns]; ok && !now.Before(t) {
		delete(c.live, ns)
	}
	c.mu.Unlock()
	return true
}

// lookLive makes creates in ns read it from the store for
// namespaceLiveLookup from now. It drops the namespaces whose time is over,
// which active drops only for a namespace asked about again: those of
// namespaces deleted for good would otherwise stay.
func (c *namespaceCache) lookLive(ns string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live == nil {
		c.live = map[string]time.Time{}
	}
	for n, t := range c.live {
		if !now.Before(t) {
			delete(c.live, n)
		}
	}
	if until := now.Add(namespaceLiveLookup); until.After(c.live[ns]) {
		c.live[ns] = until
	}
}

// markInactive records that ns stopped being active at rev, a write of
// this server's that its watch may not have delivered yet. Once the watch
// has delivered rev, the entry holds that state or a newer one, or ns is
// gone from entries because the watch delivered its deletion: a mark then
// would only add an entry that nothing removes.
func (c *namespaceCache) markInactive(ns string, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev <= c.seen {
		return
	}
	c.setLocked(ns, namespaceEntry{rev: rev})
}

// size returns how many namespaces the cache holds entries and live
// lookups for (tests).
func (c *namespaceCache) size() (entries, live int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries), len(c.live)
}

// setLocked records e for ns unless a newer state is recorded already.
func (c *namespaceCache) setLocked(ns string, e namespaceEntry) {
	if c.entries == nil {
		c.entries = map[string]namespaceEntry{}
	}
	if old, ok := c.entries[ns]; ok && old.rev >= e.rev {
		return
	}
	c.entries[ns] = e
}

// reset replaces the entries by those of a list read at rev, keeping the
// newer states this server recorded meanwhile, and marks the cache synced.
func (c *namespaceCache) reset(listed map[string]namespaceEntry, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ns, e := range c.entries {
		if e.rev > rev {
			if l, ok := listed[ns]; !ok || l.rev < e.rev {
				listed[ns] = e
			}
		}
	}
	c.entries = listed
	c.seen = rev
	c.synced = true
}

// apply records a watch event.
func (c *namespaceCache) apply(ev store.Event) {
	ns, ok := strings.CutPrefix(ev.Object.Key, namespacePrefix)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = max(c.seen, ev.Revision())
	if ev.Type == store.Deleted {
		// The watch is in revision order: no older state of ns can follow.
		// A newer one recorded by markInactive stays.
		if e, ok := c.entries[ns]; ok && e.rev <= ev.Revision() {
			delete(c.entries, ns)
		}
		return
	}
	c.setLocked(ns, namespaceEntry{rev: ev.Revision(), active: !terminating(ev.Object.Value)})
}

// unsync makes the cache answer nothing until the next reset.
func (c *namespaceCache) unsync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.synced = false
}

// checkNamespace refuses a create of name (of gr) in the namespace ns when
// ns does not exist (404) or is terminating (403, namespaceTerminatingError),
// from the cache when it knows ns as active, from the store otherwise.
func (s *Service) checkNamespace(ctx context.Context, gr schema.GroupResource, name, ns string) error {
	if s.namespaces.active(ns, s.opts.Now()) {
		return nil
	}
	kv, err := s.store.Get(ctx, store.ObjectKey("", kinds.NamespaceResource.Resource, "", ns), store.GetOptions{})
	if err != nil {
		return storeError(err, kinds.NamespaceResource.GroupResource(), ns)
	}
	if terminating(kv.Value) {
		return namespaceTerminatingError(gr, name, ns)
	}
	return nil
}

// recheckNamespace checks, once a create of name (of gr, stored at k) has
// committed at rev, that its namespace ns is still active. checkNamespace
// ran before admission and validation: a namespace whose deletion began
// since may have been emptied (the collector lists its content) before the
// create committed, and then finalized and removed, leaving the object
// behind in a namespace that is gone, its client told it was created. So a
// create into a namespace the cache does not know as active reads the
// namespace again; terminating or gone, the create is undone (the object
// deleted) and refused as checkNamespace refuses it. A namespace
// still active here holds the object when its deletion later begins,
// which this server's cache learns before the deletion commits (the
// deleting hook): the collector's list, after that, finds it.
func (s *Service) recheckNamespace(ctx context.Context, gr schema.GroupResource, k, name, ns string, rev int64) error {
	if s.namespaces.active(ns, s.opts.Now()) {
		return nil
	}
	kv, err := s.store.Get(ctx, store.ObjectKey("", kinds.NamespaceResource.Resource, "", ns), store.GetOptions{})
	switch {
	case err == nil && !terminating(kv.Value):
		return nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return storeError(err, kinds.NamespaceResource.GroupResource(), ns)
	}
	_, _, derr := s.store.Delete(ctx, k, rev)
	if errors.Is(derr, store.ErrConflict) {
		// Written again since, in a namespace going away: it goes too.
		_, _, derr = s.store.Delete(ctx, k, 0)
	}
	if derr != nil && !errors.Is(derr, store.ErrNotFound) {
		return storeError(derr, gr, name)
	}
	if err != nil {
		return storeError(err, kinds.NamespaceResource.GroupResource(), ns)
	}
	return namespaceTerminatingError(gr, name, ns)
}

// followNamespaces keeps the namespace cache in step with the store until
// ctx is done: a list, then a watch from its revision, again after a second
// when the watch ends. The cache answers nothing outside the watch.
func (s *Service) followNamespaces(ctx context.Context) {
	defer s.namespaces.unsync()
	for ctx.Err() == nil {
		err := s.watchNamespaces(ctx)
		s.namespaces.unsync()
		if err != nil && ctx.Err() == nil {
			s.log.Warn("namespace follower restarts", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *Service) watchNamespaces(ctx context.Context) error {
	listed := map[string]namespaceEntry{}
	rev, err := store.ListPages(ctx, s.store, namespacePrefix, store.ListOptions{Limit: 1000}, func(items []store.KeyValue) error {
		for _, kv := range items {
			if ns, ok := strings.CutPrefix(kv.Key, namespacePrefix); ok {
				listed[ns] = namespaceEntry{rev: kv.ModRevision, active: !terminating(kv.Value)}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	w, err := storeWatch(ctx, s.store, namespacePrefix, rev)
	if err != nil {
		return err
	}
	defer w.Stop()
	s.namespaces.reset(listed, rev)
	for ev := range w.Events() {
		s.namespaces.apply(ev)
	}
	if err := w.Err(); err != nil && !errors.Is(err, store.ErrClosed) {
		return err
	}
	return nil
}

// namespaceRevision is the revision in obj's resourceVersion, 0 when it has
// none.
func namespaceRevision(obj map[string]any) int64 {
	meta, _ := obj["metadata"].(map[string]any)
	rv, _ := meta["resourceVersion"].(string)
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}
