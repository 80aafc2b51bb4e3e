package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// The controller's event recorder (run.event, recordEvents, eventKey,
// EventAggregator) shadows client-go's EventCorrelator (tools/record). These
// tests feed both the same events, at the same (synctest) clock, and compare
// per event what each writes: a new Event, or an update of an existing one,
// and then the Event's name, count, firstTimestamp and lastTimestamp.
//
// The comparison is restricted to what is meant to match. Deliberate
// differences, each switched off or accounted for on the client-go side:
//   - Window. Ours counts a repeat into the earlier Event only when the same
//     event was last seen within eventAggregationWindow; client-go's counting
//     (its eventLogger) has no window and counts into the earlier Event for as
//     long as its LRU remembers it (and records anew when the patch finds it
//     gone). Past the window the test checks that ours records anew, then
//     hands client-go the new Event through UpdateState, as client-go's
//     recorder does with whatever the server returns.
//   - Similar messages. client-go rewrites the tenth event within 10 minutes
//     that differs from the others only by message into an Event "(combined
//     from similar events)"; ours keeps one Event per message. MaxEvents is
//     set out of reach.
//   - Spam filter. client-go drops events about an object past a token
//     bucket (burst 25, then one per 5 minutes); ours records every event and
//     bounds only what waits to be written (eventBuffer). BurstSize is set
//     out of reach.
//   - Key. eventKey leaves out the involved object's kind and apiVersion,
//     which client-go's key includes: the uid tells objects apart, and every
//     object the controller reports on is stored and so has one. The
//     objects here all have uids.

// aggregationWindow is the window as documented (docs/RATIONALE.md, "Why are
// repeated events aggregated?"), spelled out so that a change of
// eventAggregationWindow fails here.
const aggregationWindow = 10 * time.Minute

// eventSink is an in-memory Events store: the Writer recordEvents writes to,
// and the EventSink-like target of the client-go side. It logs each write.
type eventSink struct {
	Client
	rv     int
	events map[string]*unstructured.Unstructured
	writes []eventWrite
}

// eventWrite is one decision: a new Event or an update of one.
type eventWrite struct {
	Update      bool
	Name        string
	Count       int64
	First, Last string
}

func (w eventWrite) String() string {
	op := "create"
	if w.Update {
		op = "update"
	}
	return fmt.Sprintf("%s %s count=%d first=%s last=%s", op, w.Name, w.Count, w.First, w.Last)
}

func newEventSink() *eventSink {
	return &eventSink{events: map[string]*unstructured.Unstructured{}}
}

func (s *eventSink) write(obj *unstructured.Unstructured, update bool) *unstructured.Unstructured {
	s.rv++
	stored := obj.DeepCopy()
	stored.SetResourceVersion(strconv.Itoa(s.rv))
	s.events[stored.GetName()] = stored
	count, _, _ := unstructured.NestedInt64(stored.Object, "count")
	first, _, _ := unstructured.NestedString(stored.Object, "firstTimestamp")
	last, _, _ := unstructured.NestedString(stored.Object, "lastTimestamp")
	s.writes = append(s.writes, eventWrite{Update: update, Name: stored.GetName(), Count: count, First: first, Last: last})
	return stored.DeepCopy()
}

func (s *eventSink) Create(_ context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, _ metav1.CreateOptions) (*unstructured.Unstructured, error) {
	if gvr != EventsResource {
		return nil, fmt.Errorf("create %v", gvr)
	}
	if _, ok := s.events[obj.GetName()]; ok {
		return nil, fmt.Errorf("event %s exists", obj.GetName())
	}
	return s.write(obj, false), nil
}

func (s *eventSink) Update(_ context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, _ metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	prev, ok := s.events[obj.GetName()]
	if gvr != EventsResource || !ok {
		return nil, fmt.Errorf("update %v %s: not found", gvr, obj.GetName())
	}
	if prev.GetResourceVersion() != obj.GetResourceVersion() {
		return nil, fmt.Errorf("update %s: conflict", obj.GetName())
	}
	return s.write(obj, true), nil
}

// k8sRecorder is client-go's correlator with the write path of its
// broadcaster (recordToSink, recordEvent): a Patch when the correlated Event
// has a count over one, else a Create; then UpdateState with what the server
// returned.
type k8sRecorder struct {
	t    *testing.T
	corr *record.EventCorrelator
	sink *eventSink
}

func newK8sRecorder(t *testing.T) *k8sRecorder {
	return &k8sRecorder{t: t, sink: newEventSink(), corr: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{
		Clock:     clock.RealClock{}, // the synctest bubble's clock
		MaxEvents: 1 << 30,
		BurstSize: 1 << 30,
	})}
}

func toV1Event(t *testing.T, u *unstructured.Unstructured) *corev1.Event {
	t.Helper()
	ev := &corev1.Event{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func fromV1Event(t *testing.T, ev *corev1.Event) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("Event")
	return u
}

// record correlates ev and writes the result; it returns the write.
func (k *k8sRecorder) record(ev *unstructured.Unstructured) eventWrite {
	k.t.Helper()
	res, err := k.corr.EventCorrelate(toV1Event(k.t, ev))
	if err != nil {
		k.t.Fatal(err)
	}
	if res.Skip {
		k.t.Fatalf("client-go skipped %s", ev.GetName())
	}
	out := fromV1Event(k.t, res.Event)
	var stored *unstructured.Unstructured
	if res.Event.Count > 1 {
		// A strategic merge patch of count, lastTimestamp and message;
		// applying it to the stored Event is writing res.Event.
		prev, ok := k.sink.events[res.Event.Name]
		if !ok {
			k.t.Fatalf("client-go patches %s, which was never created", res.Event.Name)
		}
		out.SetResourceVersion(prev.GetResourceVersion())
		stored, err = k.sink.Update(context.Background(), EventsResource, out, metav1.UpdateOptions{})
	} else {
		out.SetResourceVersion("")
		stored, err = k.sink.Create(context.Background(), EventsResource, out, metav1.CreateOptions{})
	}
	if err != nil {
		k.t.Fatal(err)
	}
	k.corr.UpdateState(toV1Event(k.t, stored))
	return k.sink.writes[len(k.sink.writes)-1]
}

// eventStep is one event: after a pause, about objects[Obj].
type eventStep struct {
	After                 time.Duration
	Obj                   int
	Type, Reason, Message string
	WantUpdate            bool  // in the table: what ours must do
	WantCount             int64 // in the table
	involvedRV            string
}

// eventObjects are the objects the events are about: namespaced and
// cluster-scoped, two kinds sharing a name.
var eventObjects = []*unstructured.Unstructured{
	eventObject("example.com/v1", "Widget", "default", "w1", "uid-w1"),
	eventObject("example.com/v1", "Widget", "team-a", "w1", "uid-w1a"),
	eventObject("example.com/v1", "Gadget", "default", "w1", "uid-g1"),
	eventObject("example.com/v1", "Cluster", "", "c1", "uid-c1"),
	eventObject("v1", "ConfigMap", "default", "cm", "uid-cm"),
}

func eventObject(apiVersion, kind, ns, name, uid string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	u.SetResourceVersion("1")
	return u
}

// diffEvents runs steps through the controller's recorder and client-go's
// correlator in a synctest bubble and compares each write.
func diffEvents(t *testing.T, steps []eventStep, table bool) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		ours := newEventSink()
		c := &Controller{
			opts: Options{Name: "widgets", Client: ours, Now: time.Now},
			log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		r := &run{events: []chan pendingEvent{make(chan pendingEvent, 1)}}
		// built holds the event run.event makes until it is handed to both.
		built := &run{events: []chan pendingEvent{make(chan pendingEvent, 1)}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.recordEvents(ctx, r)
		}()
		k8s := newK8sRecorder(t)
		lastSeen := map[string]time.Time{}
		updates, past := 0, 0
		for i, s := range steps {
			time.Sleep(s.After)
			obj := eventObjects[s.Obj].DeepCopy()
			if s.involvedRV != "" {
				obj.SetResourceVersion(s.involvedRV)
			}
			built.event(c, obj, s.Type, s.Reason, s.Message)
			ev := <-built.events[0]
			pending := ev.obj.DeepCopy()
			r.events[0] <- ev
			synctest.Wait()
			if len(ours.writes) != i+1 {
				t.Fatalf("step %d: ours made %d writes in all, want %d", i, len(ours.writes), i+1)
			}
			got := ours.writes[i]
			key := eventKey(pending)
			prev, seen := lastSeen[key]
			pastWindow := seen && time.Since(prev) > aggregationWindow
			lastSeen[key] = time.Now()
			if table && (got.Update != s.WantUpdate || got.Count != s.WantCount) {
				t.Errorf("step %d: ours: %v, want update=%v count=%d", i, got, s.WantUpdate, s.WantCount)
			}
			if got.Update {
				updates++
			}
			if pastWindow {
				past++
				// Deliberately different: see the top of this file.
				if got.Update || got.Count != 1 {
					t.Errorf("step %d: ours past the window: %v, want a new Event", i, got)
				}
				res, err := k8s.corr.EventCorrelate(toV1Event(t, pending))
				if err != nil || res.Skip || res.Event.Count < 2 {
					t.Errorf("step %d: client-go past the window: %+v, %v; want a count into the earlier Event", i, res, err)
				}
				k8s.corr.UpdateState(toV1Event(t, ours.events[got.Name]))
				k8s.sink.events[got.Name] = ours.events[got.Name].DeepCopy()
				continue
			}
			want := k8s.record(pending)
			if got != want {
				t.Errorf("step %d (%s %s/%s %s %q):\n ours:       %v\n client-go:  %v", i,
					obj.GetKind(), obj.GetNamespace(), obj.GetName(), s.Reason, s.Message, got, want)
			}
		}
		cancel()
		<-done
		creates := len(steps) - updates - past
		t.Logf("%d events: %d new, %d updates, %d new past the window", len(steps), creates, updates, past)
		if !table && (creates < 20 || updates < len(steps)/4 || past == 0 || past > len(steps)/4) {
			t.Errorf("the sequence does not exercise every outcome")
		}
	})
}

func TestEventAggregationMatchesClientGo(t *testing.T) {
	same := func(after time.Duration, update bool, count int64) eventStep {
		return eventStep{After: after, Type: "Warning", Reason: "Failed", Message: "boom", WantUpdate: update, WantCount: count}
	}
	tests := []struct {
		name  string
		steps []eventStep
	}{
		{"a repeat counts into the first Event", []eventStep{
			same(0, false, 1), same(time.Second, true, 2), same(0, true, 3), same(time.Minute, true, 4),
		}},
		{"another message is an Event of its own", []eventStep{
			same(0, false, 1),
			{After: time.Second, Type: "Warning", Reason: "Failed", Message: "bang", WantCount: 1},
			same(time.Second, true, 2),
		}},
		{"another reason, type or object is an Event of its own", []eventStep{
			same(0, false, 1),
			{Type: "Warning", Reason: "Retried", Message: "boom", WantCount: 1},
			{Type: "Normal", Reason: "Failed", Message: "boom", WantCount: 1},
			{Obj: 1, Type: "Warning", Reason: "Failed", Message: "boom", WantCount: 1},
			{Obj: 2, Type: "Warning", Reason: "Failed", Message: "boom", WantCount: 1},
			{Obj: 3, Type: "Warning", Reason: "Failed", Message: "boom", WantCount: 1},
			same(0, true, 2),
		}},
		{"types other than Warning are Normal, no reason is Unspecified", []eventStep{
			{Type: "Normal", Reason: "", Message: "m", WantCount: 1},
			{Type: "Info", Reason: "Unspecified", Message: "m", WantUpdate: true, WantCount: 2},
			{Type: "", Reason: "", Message: "m", WantUpdate: true, WantCount: 3},
		}},
		{"the involved object's resourceVersion is not part of the key", []eventStep{
			same(0, false, 1),
			{Type: "Warning", Reason: "Failed", Message: "boom", WantUpdate: true, WantCount: 2, involvedRV: "7"},
		}},
		{"the window runs from the last occurrence", []eventStep{
			same(0, false, 1), same(9*time.Minute, true, 2), same(9*time.Minute, true, 3), same(9*time.Minute, true, 4),
		}},
		{"past the window a repeat is a new Event", []eventStep{
			same(0, false, 1), same(time.Minute, true, 2), same(11*time.Minute, false, 1), same(time.Minute, true, 2),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { diffEvents(t, tt.steps, true) })
	}
}

// A fixed-seed random sequence of events over a handful of objects, types,
// reasons and messages, with pauses mostly short and now and then past the
// window.
func TestEventAggregationMatchesClientGoRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 2026))
	types := []string{"Normal", "Warning", "", "Info"}
	reasons := []string{"Failed", "Applied"}
	messages := []string{"boom", "applied 3 children"}
	steps := make([]eventStep, 600)
	for i := range steps {
		var after time.Duration
		switch p := rng.IntN(1000); {
		case p < 500:
		case p < 995:
			after = time.Duration(rng.IntN(10)) * time.Second
		default:
			after = aggregationWindow + time.Duration(rng.IntN(300))*time.Second
		}
		steps[i] = eventStep{
			After:      after,
			Obj:        rng.IntN(len(eventObjects)),
			Type:       types[rng.IntN(len(types))],
			Reason:     reasons[rng.IntN(len(reasons))],
			Message:    messages[rng.IntN(len(messages))],
			involvedRV: strconv.Itoa(1 + rng.IntN(3)),
		}
	}
	diffEvents(t, steps, false)
}
