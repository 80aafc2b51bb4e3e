package gc

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// eventPeriod is how often Events are expired: a tenth of EventTTL, at least
// a second, at most SweepInterval.
func (c *Collector) eventPeriod() time.Duration {
	return max(time.Second, min(c.opts.EventTTL/10, c.opts.SweepInterval))
}

// eventExpired tells whether an Event was last updated more than EventTTL ago
// (by lastTimestamp, eventTime or creationTimestamp, the latest present).
func (c *Collector) eventExpired(ev *unstructured.Unstructured) bool {
	last := ev.GetCreationTimestamp().Time
	for _, f := range []string{"lastTimestamp", "eventTime"} {
		if v, ok, _ := unstructured.NestedString(ev.Object, f); ok {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil && t.After(last) {
				last = t
			}
		}
	}
	return c.opts.Now().Sub(last) > c.opts.EventTTL
}

// expireEvents deletes the Events last updated more than EventTTL ago.
func (c *Collector) expireEvents(ctx context.Context) error {
	r, ok := c.svc.ServedResource(kinds.EventResource.GroupResource())
	if !ok {
		return nil
	}
	evs, err := c.listGC(ctx, r, store.ResourcePrefix(kinds.EventResource.Group, kinds.EventResource.Resource, ""))
	if err != nil {
		return err
	}
	background := metav1.DeletePropagationBackground
	for _, ev := range evs {
		if !c.eventExpired(ev.obj) {
			continue
		}
		uid := ev.obj.GetUID()
		_, _, err := c.svc.DeleteObject(ctx, kinds.EventResource, ev.obj.GetNamespace(), ev.obj.GetName(), metav1.DeleteOptions{
			PropagationPolicy: &background,
			Preconditions:     &metav1.Preconditions{UID: &uid},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}
