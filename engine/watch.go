package engine

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// InitialEventsEndAnnotation marks the bookmark that ends the initial events
// of a watch with sendInitialEvents.
const InitialEventsEndAnnotation = "k8s.io/initial-events-end"

// Watch streams the changes to the objects of gvr in namespace ("" for all
// namespaces) that opts selects. From resourceVersion "" or "0", or with
// sendInitialEvents, it first sends the current objects as ADDED events
// (then, with sendInitialEvents, a bookmark carrying
// k8s.io/initial-events-end); from a resourceVersion N it sends every change
// after N. An object that stops or starts matching the selectors is sent as
// DELETED or ADDED. With allowWatchBookmarks it sends BOOKMARK events
// every Options.BookmarkInterval and, as kube-apiserver does, one
// bookmarkLead before the watch's deadline (timeoutSeconds), so that a
// client resumes close to the store's revision. It ends after
// timeoutSeconds, when ctx is done or on Stop; when the store cuts it off
// or the revision is compacted it sends an ERROR event with a 410 Expired
// status and ends.
//
// The objects of ADDED, MODIFIED and DELETED events are shared by every
// watch of the resource: those that follow a store change (each stored
// document is decoded once for all of them), and the initial ones of
// watches that start at the same revision (see initialLists). Callers must
// not modify them, and copy (DeepCopy) what they want to change.
func (s *Service) Watch(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	sv, err := s.lookup(gvr, namespace, true)
	if err != nil {
		return nil, err
	}
	sel, err := parseSelector(sv, opts.LabelSelector, opts.FieldSelector)
	if err != nil {
		return nil, err
	}
	from, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	initial := opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	if opts.SendInitialEvents != nil {
		initial = *opts.SendInitialEvents
	}
	// Stop ends the watch through its stop channel, not a context of its
	// own: a child context costs an idle watch most of a kilobyte (the
	// parent's record of it included), and ctx's end is seen by selecting
	// on its Done channel.
	cancel := context.CancelFunc(func() {})
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*opts.TimeoutSeconds)*time.Second)
	}
	stored := sv.StoredGroupResource()
	prefix := store.ResourcePrefix(stored.Group, stored.Resource, namespace)

	var initialItems *initialList
	if initial {
		// From resourceVersion "0" ("any"), a list another watch holds,
		// however old, will do, as Kubernetes serves such a watch from its
		// cache; otherwise it must be at least as recent as the store.
		il, err := s.initialListOf(ctx, sv, namespace, opts, opts.ResourceVersion == "0")
		if err != nil {
			cancel()
			return nil, err
		}
		initialItems = il
		from = il.rev
	} else if err := s.notOlderThan(ctx, from); err != nil {
		cancel()
		return nil, err
	}
	w, err := stoppedStoreWatch(ctx, s.store, prefix, from)
	if err != nil && errors.Is(err, store.ErrCompacted) && initial && opts.ResourceVersion == "0" {
		// The list shared was older than the history kept: read a new one.
		il, lerr := s.initialListOf(ctx, sv, namespace, opts, false)
		if lerr != nil {
			cancel()
			return nil, lerr
		}
		initialItems, from = il, il.rev
		w, err = stoppedStoreWatch(ctx, s.store, prefix, from)
	}
	if err != nil {
		cancel()
		return nil, storeError(err, gvr.GroupResource(), "")
	}
	ow := &objectWatch{
		ch:     make(chan watch.Event),
		sinkCh: make(chan sink),
		cancel: cancel,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),

		decode:    s.watchDecode,
		kind:      sv,
		events:    w,
		sel:       sel,
		initial:   initialItems,
		rev:       from,
		bookmarks: opts.AllowWatchBookmarks,
		endMarker: initial && opts.SendInitialEvents != nil,
		interval:  s.opts.BookmarkInterval,
	}
	ow.deadline, _ = ctx.Deadline()
	go ow.run(ctx)
	return ow, nil
}

var _ watch.Interface = (*objectWatch)(nil)

// objectWatch is a running Watch. Its goroutine owns the store watcher and,
// once Deliver has handed it one, the sink.
type objectWatch struct {
	ch     chan watch.Event
	sinkCh chan sink          // Deliver's hand-over to the goroutine
	cancel context.CancelFunc // releases the timeoutSeconds context, if any
	stop   chan struct{}      // closed by Stop
	once   sync.Once          // closes stop
	done   chan struct{}

	// What Watch set up; the goroutine's own once it runs.
	decode    *kinds.DecodeCache // the Service's, shared by its watches
	kind      *kinds.Kind
	events    store.Watcher
	sel       *selector
	initial   *initialList // the initial events; nil without
	rev       int64        // the revision the watch is at
	bookmarks bool         // send bookmarks (allowWatchBookmarks)
	endMarker bool         // end the initial events with a bookmark (sendInitialEvents)
	interval  time.Duration
	deadline  time.Time // when the watch ends (timeoutSeconds); zero for none

	// err is the store's error when the store ended the watch; written by
	// the goroutine before it ends, read by Err once it has.
	err error
}

// sink is where a watch in sink mode sends its events; see Deliver and
// DeliverFlushed.
type sink struct {
	send  func(watch.Event) bool
	flush func() bool // nil for none
	end   func()
}

func (w *objectWatch) ResultChan() <-chan watch.Event { return w.ch }

// Deliver makes the watch call send with each further event instead of
// sending it on ResultChan: send is called from the watch's goroutine, in
// order, must not block, and ends the watch by returning false. When the
// watch ends, end is called once, after the last send (at once, by Deliver,
// if the watch has already ended), and ResultChan is closed. Deliver is
// meant to be called once, before anything is received from ResultChan. It
// saves a consumer that only queues events (the WebSocket server) a
// goroutine and a hand-off per event.
func (w *objectWatch) Deliver(send func(watch.Event) bool, end func()) {
	w.DeliverFlushed(send, nil, end)
}

// DeliverFlushed is Deliver with flush, which the watch's goroutine calls
// once it has sent one or more events and finds no other waiting, before
// it waits for the next; false ends the watch. A consumer that writes each
// event as send gets it (the HTTP watch) flushes there: once per burst of
// events, however many watchers share them, and with no goroutine of its
// own between the watch and the connection. end is not preceded by a
// flush.
func (w *objectWatch) DeliverFlushed(send func(watch.Event) bool, flush func() bool, end func()) {
	select {
	case w.sinkCh <- sink{send: send, flush: flush, end: end}:
	case <-w.done:
		end()
	}
}

// Err tells why the watch ended, once it has (Stop has returned, or a
// sink's end was called): the store's error when the store cut it off
// (store.ErrWatcherTooSlow for a watch that fell behind the store's
// events, its client too slow to take them), which the watch's last event
// reports as an ERROR; nil otherwise.
func (w *objectWatch) Err() error { return w.err }

// Stop ends the watch and waits for its goroutine. It is idempotent.
func (w *objectWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

// run sends the watch's events until it ends: the initial events, then one
// for each store event the selectors let through, and bookmarks.
func (w *objectWatch) run(ctx context.Context) {
	sv, sw, sel, rev := w.kind, w.events, w.sel, w.rev
	var out sink // set by Deliver
	defer close(w.done)
	defer func() {
		if out.end != nil {
			out.end()
		}
	}()
	defer close(w.ch)
	defer sw.Stop()
	defer w.cancel()

	sinkCh := w.sinkCh
	unflushed := false // out has events that out.flush has not seen
	send := func(ev watch.Event) bool {
		if out.send == nil {
			select {
			case w.ch <- ev:
				return true
			case out = <-sinkCh:
				sinkCh = nil
			case <-ctx.Done():
				return false
			case <-w.stop:
				return false
			}
		}
		unflushed = out.flush != nil
		return out.send(ev)
	}
	if w.initial != nil {
		for i := range w.initial.items {
			if !send(watch.Event{Type: watch.Added, Object: &w.initial.items[i]}) {
				return
			}
		}
		// Sent: the list may go once no other watch holds it.
		w.initial = nil
	}
	if w.endMarker && w.bookmarks {
		if !send(bookmark(sv, rev, true)) {
			return
		}
	}
	// tick fires when the next bookmark is due; nil without bookmarks.
	var tick <-chan time.Time
	var timer *time.Timer
	schedule := func() { timer.Reset(nextBookmark(time.Now(), w.deadline, w.interval)) }
	if w.bookmarks {
		timer = time.NewTimer(nextBookmark(time.Now(), w.deadline, w.interval))
		defer timer.Stop()
		tick = timer.C
	}
	if sel.empty() {
		sel = nil // matches at once
	}
	// handle sends what a store event (or the end of the store watch) means
	// for this watch; false ends the watch.
	events := sw.Events()
	handle := func(ev store.Event, ok bool) bool {
		if !ok {
			if err := sw.Err(); err != nil && !errors.Is(err, store.ErrClosed) {
				w.err = err
				st := storeError(err, sv.GVR.GroupResource(), "").(apierrors.APIStatus).Status()
				send(watch.Event{Type: watch.Error, Object: &st})
			}
			return false
		}
		rev = ev.Revision()
		wev, ok := convertEvent(w.decode, sv, sel, ev)
		return !ok || send(wev)
	}
	// drain handles the events already waiting, one by one: a receive alone
	// costs much less than the select below, which locks every channel it
	// waits on. false ends the watch.
	drain := func() bool {
		for {
			select {
			case ev, ok := <-events:
				if !handle(ev, ok) {
					return false
				}
			default:
				return true
			}
		}
	}
	done := ctx.Done()
	superseded := sv.ReadSchemas().Superseded()
	for {
		if unflushed {
			unflushed = false
			if !out.flush() {
				return
			}
		}
		select {
		case <-done:
			return
		case <-w.stop:
			return
		case <-superseded:
			// The kind's schemas changed: end, so that the client watches
			// again and reads through the new ones.
			return
		case out = <-sinkCh:
			sinkCh = nil
		case <-tick:
			// A bookmark carries the store's progress, not only the last
			// event this watch selected, so that a watch of a quiet kind or
			// namespace can resume after its start has been compacted. The
			// events up to that progress are all in the channel already:
			// handle them first.
			if p, ok := sw.Progress(); ok {
				if !drain() {
					return
				}
				rev = max(rev, p)
			}
			if !send(bookmark(sv, rev, false)) {
				return
			}
			schedule()
		case ev, ok := <-events:
			if !handle(ev, ok) || !drain() {
				return
			}
		}
	}
}

// DefaultBookmarkInterval is how often a watch that allows bookmarks gets
// one when Options.BookmarkInterval is not set.
const DefaultBookmarkInterval = 15 * time.Second

// bookmarkLead is how long before a watch's deadline a bookmark
// goes: kube-apiserver's 2 seconds.
const bookmarkLead = 2 * time.Second

// nextBookmark returns how long from now the next bookmark of a watch that
// ends at deadline (zero for never) is due: after interval, or bookmarkLead
// before the deadline if that is sooner and still ahead. Unlike
// kube-apiserver, which sends nothing more once the deadline is within
// bookmarkLead, the periodic bookmarks go on: a watch of a few seconds,
// shorter than bookmarkLead, still gets them.
func nextBookmark(now, deadline time.Time, interval time.Duration) time.Duration {
	if deadline.IsZero() {
		return interval
	}
	if pre := deadline.Add(-bookmarkLead).Sub(now); pre > 0 && pre < interval {
		return pre
	}
	return interval
}

// bookmark is a BOOKMARK event of sv's kind at rev; end marks the end of
// the initial events.
func bookmark(sv *kinds.Kind, rev int64, end bool) watch.Event {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(sv.GVR.GroupVersion().String())
	u.SetKind(sv.Kind)
	u.SetResourceVersion(strconv.FormatInt(rev, 10))
	if end {
		u.SetAnnotations(map[string]string{InitialEventsEndAnnotation: "true"})
	}
	return watch.Event{Type: watch.Bookmark, Object: u}
}

// convertEvent turns a store event into the watch event a client with sel
// sees, if any.
func convertEvent(dc *kinds.DecodeCache, sv *kinds.Kind, sel *selector, ev store.Event) (watch.Event, bool) {
	// A delete event carries the document as it was, written at Prev's
	// revision: what decides whether it reads as stored.
	written := ev.Object.ModRevision
	if ev.Type == store.Deleted && ev.Prev != nil {
		written = ev.Prev.ModRevision
	}
	obj, err := dc.Decode(sv, &ev.Object, written)
	if err != nil {
		st := err.(apierrors.APIStatus).Status()
		return watch.Event{Type: watch.Error, Object: &st}, true
	}
	now := sel.matches(obj.Object)
	was := false
	if ev.Prev != nil && !sel.empty() {
		if prev, err := dc.Decode(sv, ev.Prev, ev.Prev.ModRevision); err == nil {
			was = sel.matches(prev.Object)
		}
	} else {
		was = now
	}
	switch ev.Type {
	case store.Added:
		return watch.Event{Type: watch.Added, Object: obj}, now
	case store.Deleted:
		return watch.Event{Type: watch.Deleted, Object: obj}, was || now
	default:
		switch {
		case now && was:
			return watch.Event{Type: watch.Modified, Object: obj}, true
		case now:
			return watch.Event{Type: watch.Added, Object: obj}, true
		case was:
			return watch.Event{Type: watch.Deleted, Object: obj}, true
		}
	}
	return watch.Event{}, false
}
