package engine

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"weak"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// initialLists shares the initial lists of watches: watches of the same
// resource, namespace and selectors that start while no write has happened
// since another one's list (or while that list is being read) get the same
// decoded objects, read and decoded once. Without it, N watchers opened
// together on a kind of large objects held N decoded copies of every object
// until each had sent them all.
//
// Its zero value is ready to use. The map holds its lists weakly: a list
// lives as long as a watch still sending it holds it, and its entry is
// removed when it is collected, so the map never keeps what no watch uses.
type initialLists struct {
	mu sync.Mutex // guards m
	m  map[initialKey]weak.Pointer[initialList]
}

// initialKey is what a watch's initial list depends on besides the revision.
type initialKey struct {
	sv                *kinds.Kind
	namespace         string
	labels, fieldsSel string
}

// initialList is one shared initial list. Its items are shared by every
// watch that sends it: nobody may modify them (Watch documents this).
type initialList struct {
	// atLeast is the store's revision before the list was read: the list
	// is at least that recent.
	atLeast int64
	// done is closed once items, rev and err are set.
	done  chan struct{}
	items []unstructured.Unstructured
	rev   int64
	err   error
}

// get returns an initial list of key at revision minRev or later: a list
// already read (or being read) that a watch still holds if there is one,
// else one read now by read, which is at least as recent as cur, the
// store's current revision. The caller keeps the returned list while it
// sends its items.
func (c *initialLists) get(ctx context.Context, key initialKey, cur, minRev int64, read func(context.Context) (*unstructured.UnstructuredList, error)) (*initialList, error) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[initialKey]weak.Pointer[initialList]{}
	}
	if wp, ok := c.m[key]; ok {
		if il := wp.Value(); il != nil && il.atLeast >= minRev {
			c.mu.Unlock()
			select {
			case <-il.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if il.err == nil {
				return il, nil
			}
			// The read failed for that watch (which got the error);
			// read again for this one.
			return c.read(ctx, key, cur, read, false)
		}
	}
	return c.read(ctx, key, cur, read, true)
}

// read reads a new list; locked tells whether the caller holds c.mu.
func (c *initialLists) read(ctx context.Context, key initialKey, cur int64, read func(context.Context) (*unstructured.UnstructuredList, error), locked bool) (*initialList, error) {
	if !locked {
		c.mu.Lock()
	}
	il := &initialList{atLeast: cur, done: make(chan struct{})}
	wp := weak.Make(il)
	c.m[key] = wp
	c.mu.Unlock()
	runtime.AddCleanup(il, func(k initialKey) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.m[k] == wp {
			delete(c.m, k)
		}
	}, key)

	// The list is read for every watch that joins it: the first one going
	// away must not end it.
	list, err := read(context.WithoutCancel(ctx))
	if err == nil {
		il.items = list.Items
		il.rev, _ = strconv.ParseInt(list.GetResourceVersion(), 10, 64)
	}
	il.err = err
	close(il.done)
	if err != nil {
		c.mu.Lock()
		if c.m[key] == wp {
			delete(c.m, key)
		}
		c.mu.Unlock()
		return nil, err
	}
	return il, nil
}

// initialListOf returns the shared initial list of a watch of sv: one at
// least as recent as the store, or, with anyRev, any one a watch holds.
func (s *Service) initialListOf(ctx context.Context, sv *kinds.Kind, namespace string, opts metav1.ListOptions, anyRev bool) (*initialList, error) {
	cur, err := s.store.CurrentRevision(ctx)
	if err != nil {
		return nil, storeError(err, sv.GVR.GroupResource(), "")
	}
	key := initialKey{sv: sv, namespace: namespace, labels: opts.LabelSelector, fieldsSel: opts.FieldSelector}
	minRev := cur
	if anyRev {
		minRev = 0
	}
	return s.initial.get(ctx, key, cur, minRev, func(ctx context.Context) (*unstructured.UnstructuredList, error) {
		return s.List(ctx, sv.GVR, namespace, metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector})
	})
}
