package controller_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// A plugin that reports the same event on every reconcile leaves one Event
// per object whose count is the number of reconciles, not an Event each
// time; an event with another message is an Event of its own.
func TestRepeatedEventsAggregate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var calls atomic.Int64
		var message atomic.Value
		message.Store("checked the widget")
		r := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			calls.Add(1)
			return &abi.ReconcileResponse{
				Status: abi.RawJSON(`{"state":"Checked"}`),
				Events: []abi.Event{{Type: "Normal", Reason: "Checked", Message: message.Load().(string)}},
			}, nil
		})
		_, stop := runManager(t, newController(t, c, "checker", r, func(o *controller.Options) { o.ResyncPeriod = time.Minute }))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		time.Sleep(3*time.Minute + time.Second) // three resyncs
		synctest.Wait()
		n := calls.Load()
		if n < 4 {
			t.Fatalf("reconciles = %d, want at least 4 (create and three resyncs)", n)
		}
		evs := events(t, c, "Checked")
		if len(evs) != 1 {
			t.Fatalf("Checked events = %d, want 1 aggregated Event", len(evs))
		}
		count, _, _ := unstructured.NestedInt64(evs[0].Object, "count")
		if count != n {
			t.Errorf("count = %d, want %d (one per reconcile)", count, n)
		}
		first, _, _ := unstructured.NestedString(evs[0].Object, "firstTimestamp")
		last, _, _ := unstructured.NestedString(evs[0].Object, "lastTimestamp")
		f, err1 := time.Parse(time.RFC3339, first)
		l, err2 := time.Parse(time.RFC3339, last)
		if err1 != nil || err2 != nil || l.Sub(f) < 3*time.Minute {
			t.Errorf("firstTimestamp %q, lastTimestamp %q: want three minutes apart or more", first, last)
		}
		if got := c.Writes("create", "events"); got != 2 { // Checked, and the Reconciled transition
			t.Errorf("event creates = %d, want 2", got)
		}

		// Another message is another Event; the first keeps its count.
		message.Store("checked the widget again")
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		evs = events(t, c, "Checked")
		if len(evs) != 2 {
			t.Fatalf("Checked events after the message changed = %d, want 2", len(evs))
		}
		for _, ev := range evs {
			msg, _, _ := unstructured.NestedString(ev.Object, "message")
			got, _, _ := unstructured.NestedInt64(ev.Object, "count")
			if want := map[string]int64{"checked the widget": n, "checked the widget again": calls.Load() - n}[msg]; got != want || want == 0 {
				t.Errorf("event %q: count %d, want %d", msg, got, want)
			}
		}
	})
}

// A reconcile that keeps failing the same way is recorded at each attempt,
// into one Event whose count and lastTimestamp follow the retries, as
// Kubernetes' controllers report a repeated failure.
func TestRepeatedFailureCountsIntoOneEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var calls atomic.Int64
		r := controller.ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			calls.Add(1)
			return &abi.ReconcileResponse{Error: "the backend is down"}, nil
		})
		_, stop := runManager(t, newController(t, c, "failing", r, nil))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		n := calls.Load()
		if n < 5 {
			t.Fatalf("reconciles = %d, want several retries", n)
		}
		evs := events(t, c, controller.ReasonReconcileFailed)
		if len(evs) != 1 {
			t.Fatalf("%s events = %d, want 1 aggregated Event", controller.ReasonReconcileFailed, len(evs))
		}
		if count, _, _ := unstructured.NestedInt64(evs[0].Object, "count"); count != n {
			t.Errorf("count = %d, want %d (one per failed attempt)", count, n)
		}
		if typ, _, _ := unstructured.NestedString(evs[0].Object, "type"); typ != "Warning" {
			t.Errorf("type = %q, want Warning", typ)
		}
		host, _ := os.Hostname()
		inst, _, _ := unstructured.NestedString(evs[0].Object, "reportingInstance")
		srcHost, _, _ := unstructured.NestedString(evs[0].Object, "source", "host")
		if inst != host || srcHost != host {
			t.Errorf("reportingInstance %q, source.host %q, want the host %q", inst, srcHost, host)
		}
	})
}
