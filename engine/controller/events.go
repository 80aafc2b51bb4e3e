package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EventsResource is where the controller records core/v1 Events.
var EventsResource = schema.GroupVersionResource{Version: "v1", Resource: "events"}

// eventSeq keeps event names unique when the clock does not move.
var eventSeq atomic.Uint64

// eventBuffer bounds the events waiting to be written; past it, events are
// dropped rather than slowing reconciles.
const eventBuffer = 1024

// event queues a core/v1 Event about obj for recordEvents to write. Events
// are informational: one that does not fit in the buffer is dropped.
func (r *run) event(c *Controller, obj *unstructured.Unstructured, typ, reason, message string) {
	if typ != "Warning" {
		typ = "Normal"
	}
	if reason == "" {
		reason = "Unspecified"
	}
	now := c.opts.Now().UTC()
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	component := "setpoint/" + c.opts.Name
	ts := now.Format(time.RFC3339)
	ev := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Event",
		"metadata": map[string]any{
			"name":      fmt.Sprintf("%s.%x", obj.GetName(), uint64(now.UnixNano())+eventSeq.Add(1)),
			"namespace": ns,
		},
		"involvedObject": map[string]any{
			"apiVersion":      obj.GetAPIVersion(),
			"kind":            obj.GetKind(),
			"name":            obj.GetName(),
			"namespace":       obj.GetNamespace(),
			"uid":             string(obj.GetUID()),
			"resourceVersion": obj.GetResourceVersion(),
		},
		"type":               typ,
		"reason":             reason,
		"message":            truncate(message),
		"count":              int64(1),
		"firstTimestamp":     ts,
		"lastTimestamp":      ts,
		"source":             map[string]any{"component": component},
		"reportingComponent": component,
		"reportingInstance":  component,
	}}
	select {
	case r.events <- ev:
	default:
		c.log.Warn("event dropped: too many pending", "reason", reason, "name", obj.GetName())
	}
}

// recordEvents writes queued events until ctx is done. A failure to record
// is logged and otherwise ignored.
func (c *Controller) recordEvents(ctx context.Context, r *run) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-r.events:
			if _, err := c.opts.Client.Create(ctx, EventsResource, ev, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
				c.log.Debug("event not recorded", "reason", ev.Object["reason"], "err", err)
			}
		}
	}
}
