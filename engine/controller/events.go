package controller

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// EventsResource is where the controller records core/v1 Events.
var EventsResource = schema.GroupVersionResource{Version: "v1", Resource: "events"}

// eventSeq keeps event names unique when the clock does not move.
var eventSeq atomic.Uint64

// reportingInstance is the host the events come from, as Kubernetes' event
// recorders report it (kubectl get events -o wide shows "component, host").
var reportingInstance = func() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}()

// eventBuffer bounds the events waiting to be written; past it, events are
// dropped rather than slowing reconciles. Each of a run's event writers has
// its share of it, and at least minEventShardBuffer.
const (
	eventBuffer         = 1024
	minEventShardBuffer = 128
)

// pendingEvent is an Event waiting to be written, with its aggregation key.
type pendingEvent struct {
	obj *unstructured.Unstructured
	key string
}

// newEventShards returns the queues of n event writers.
func newEventShards(n int) []chan pendingEvent {
	n = max(n, 1)
	shards := make([]chan pendingEvent, n)
	for i := range shards {
		shards[i] = make(chan pendingEvent, max(eventBuffer/n, minEventShardBuffer))
	}
	return shards
}

// event queues a core/v1 Event about obj for recordEvents to write, on the
// writer its aggregation key falls to, and does not wait for it: Events are
// informational (best effort in Kubernetes too), and one that does not fit
// in the writer's queue is dropped.
func (r *run) event(c *Controller, obj *unstructured.Unstructured, typ, reason, message string) {
	ev, err := c.newEvent(obj, typ, reason, message)
	if err != nil {
		c.log.Warn("event not recorded", "reason", reason, "name", obj.GetName(), "err", err)
		return
	}
	key := eventKey(ev)
	h := fnv.New32a()
	h.Write([]byte(key))
	select {
	case r.events[h.Sum32()%uint32(len(r.events))] <- pendingEvent{obj: ev, key: key}:
	default:
		c.log.Warn("event dropped: too many pending", "reason", ev.Object["reason"], "name", obj.GetName())
	}
}

// newEvent builds the core/v1 Event of an event about obj as corev1.Event
// encodes it, the shape the Event kind stores, which writeEvents tells the
// engine (kinds.WithBuiltShape) so that it is not decoded again.
func (c *Controller) newEvent(obj *unstructured.Unstructured, typ, reason, message string) (*unstructured.Unstructured, error) {
	if typ != "Warning" {
		typ = "Normal"
	}
	if reason == "" {
		reason = "Unspecified"
	}
	now := metav1.NewTime(c.opts.Now())
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	component := "setpoint/" + c.opts.Name
	return kinds.BuiltEvent(&corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", obj.GetName(), uint64(now.UnixNano())+eventSeq.Add(1)),
			Namespace: ns,
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), Namespace: obj.GetNamespace(),
			UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
		Type: typ, Reason: reason, Message: truncate(message), Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source:              corev1.EventSource{Component: component, Host: reportingInstance},
		ReportingController: component, ReportingInstance: reportingInstance,
	})
}

// Repeated events are aggregated the way Kubernetes' event recorders do: an
// event with the same object, type, reason, message and source as one this
// recorder wrote within eventAggregationWindow updates that Event (count
// and lastTimestamp) instead of adding another, so a reconcile that fails
// the same way on every retry leaves one Event whose count grows.
const (
	eventAggregationWindow = 10 * time.Minute
	// eventAggregationKeys bounds the recorder's memory of recent events.
	eventAggregationKeys = 4096
)

// eventKey identifies the events that aggregate into one.
func eventKey(ev *unstructured.Unstructured) string {
	inv, _ := ev.Object["involvedObject"].(map[string]any)
	return fmt.Sprint(inv["uid"], "\x00", inv["namespace"], "\x00", inv["name"], "\x00", ev.Object["type"], "\x00",
		ev.Object["reason"], "\x00", ev.Object["message"], "\x00", ev.Object["reportingComponent"])
}

// recordEvents writes queued events until ctx is done, with one writer per
// queue of r.events, so that the events of many workers are written as fast
// as those workers write everything else: each write waits for its commit,
// and the writers' writes share the store's group commits. An aggregation
// key always falls to the same writer, which alone remembers it, so the
// repeats of an event are counted in order. A failure to record is logged
// and otherwise ignored.
func (c *Controller) recordEvents(ctx context.Context, r *run) {
	var wg sync.WaitGroup
	size := max(eventAggregationKeys/len(r.events), minEventShardBuffer)
	for _, q := range r.events {
		wg.Go(func() { c.writeEvents(ctx, q, newEventAggregator(size)) })
	}
	wg.Wait()
}

// writeEvents writes the events of q, counting repeats with agg, until ctx
// is done.
func (c *Controller) writeEvents(ctx context.Context, q <-chan pendingEvent, agg *EventAggregator) {
	// The Events are built here in the shape the Event kind stores
	// (TestEventBuiltShape): the engine skips decoding them again.
	ctx = kinds.WithBuiltShape(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-q:
			ev := p.obj
			ts, _ := ev.Object["lastTimestamp"].(string)
			bumped, err := agg.Bump(ctx, c.opts.Client, p.key, ts)
			if bumped {
				continue
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// Deleted or changed meanwhile: record it anew.
				c.log.Debug("event not aggregated", "reason", ev.Object["reason"], "err", err)
			}
			stored, err := c.opts.Client.Create(ctx, EventsResource, ev, metav1.CreateOptions{})
			if err != nil {
				if ctx.Err() == nil {
					c.log.Debug("event not recorded", "reason", ev.Object["reason"], "err", err)
				}
				continue
			}
			agg.Add(p.key, stored)
		}
	}
}

// EventAggregator remembers the Events recently recorded, by aggregation
// key, so that a repeated event counts into the Event recorded before
// instead of adding another (see eventAggregationWindow). The controller's
// event recorder and the plugins' emit_event both use it. It is safe for
// concurrent use.
type EventAggregator struct {
	recent *cache.LRUExpireCache
}

// NewEventAggregator returns an aggregator that remembers nothing yet.
func NewEventAggregator() *EventAggregator { return newEventAggregator(eventAggregationKeys) }

// newEventAggregator returns an aggregator that remembers up to size keys.
func newEventAggregator(size int) *EventAggregator {
	return &EventAggregator{recent: cache.NewLRUExpireCache(size)}
}

// Bump counts one more occurrence, seen last at lastTimestamp, into the
// Event recorded under key within the window. bumped is false when there is
// none, or when it could not be updated (err: deleted, or changed meanwhile);
// the caller then records the event anew.
func (a *EventAggregator) Bump(ctx context.Context, w Writer, key, lastTimestamp string) (bumped bool, err error) {
	prev, ok := a.recent.Get(key)
	if !ok {
		return false, nil
	}
	next := prev.(*unstructured.Unstructured).DeepCopy()
	count, _, _ := unstructured.NestedInt64(next.Object, "count")
	next.Object["count"] = max(count, 1) + 1
	next.Object["lastTimestamp"] = lastTimestamp
	stored, err := w.Update(ctx, EventsResource, next, metav1.UpdateOptions{})
	if err != nil {
		return false, err
	}
	a.Add(key, stored)
	return true, nil
}

// Add remembers stored as the Event recorded under key.
func (a *EventAggregator) Add(key string, stored *unstructured.Unstructured) {
	a.recent.Add(key, stored, eventAggregationWindow)
}
