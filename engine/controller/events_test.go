package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// The events of many workers are written by as many writers, without the
// reconciles waiting for them: with every event write held, all objects
// still converge, and several writes wait at once. Once they go through,
// each object has one Event per reason, whose count is the number of
// reconciles that reported it.
func TestEventsWrittenConcurrentlyAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		const n, workers = 24, 8
		var calls sync.Map // name -> *atomic.Int64
		r := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			var obj struct {
				Metadata struct{ Name string } `json:"metadata"`
			}
			if err := json.Unmarshal(req.Object, &obj); err != nil {
				return nil, err
			}
			v, _ := calls.LoadOrStore(obj.Metadata.Name, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			return &abi.ReconcileResponse{
				Status: abi.RawJSON(`{"state":"Checked"}`),
				Events: []abi.Event{{Type: "Normal", Reason: "Checked", Message: "checked " + obj.Metadata.Name}},
			}, nil
		})
		gate := make(chan struct{})
		var waiting, most atomic.Int64
		c.setFail(func(verb string, gvr schema.GroupVersionResource, _ string) error {
			if gvr != controller.EventsResource {
				return nil
			}
			w := waiting.Add(1)
			for m := most.Load(); w > m && !most.CompareAndSwap(m, w); m = most.Load() {
			}
			<-gate
			waiting.Add(-1)
			return nil
		})
		_, stop := runManager(t, newController(t, c, "checker", r, func(o *controller.Options) {
			o.Workers = workers
			o.ResyncPeriod = time.Minute
		}))
		defer stop()
		for i := range n {
			create(t, c, widgets, newWidget(fmt.Sprintf("w%d", i), "small"))
		}
		synctest.Wait()
		for i := range n {
			if st, reason, _ := ready(get(t, c, widgets, fmt.Sprintf("w%d", i))); st != "True" {
				t.Fatalf("w%d: Ready %q (%s) with its events held, want True: a reconcile waited for its events", i, st, reason)
			}
		}
		if m := most.Load(); m < 2 || m > workers {
			t.Errorf("event writes waiting at once = %d, want between 2 and %d (one writer per worker)", m, workers)
		}
		close(gate)
		synctest.Wait()
		time.Sleep(2*time.Minute + time.Second) // two resyncs
		synctest.Wait()

		for _, reason := range []string{"Checked", controller.ReasonReconciled} {
			evs := events(t, c, reason)
			if len(evs) != n {
				t.Fatalf("%s events = %d, want %d (one per object)", reason, len(evs), n)
			}
			for _, ev := range evs {
				name, _, _ := unstructured.NestedString(ev.Object, "involvedObject", "name")
				count, _, _ := unstructured.NestedInt64(ev.Object, "count")
				want := int64(1)
				if reason == "Checked" {
					v, _ := calls.Load(name)
					if v == nil {
						t.Fatalf("event for %q, which was never reconciled", name)
					}
					want = v.(*atomic.Int64).Load()
					if want < 3 {
						t.Errorf("%s: %d reconciles, want 3 or more (create and two resyncs)", name, want)
					}
				}
				if count != want {
					t.Errorf("%s event of %s: count %d, want %d", reason, name, count, want)
				}
			}
		}
	})
}
