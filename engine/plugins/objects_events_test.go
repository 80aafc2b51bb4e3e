package plugins

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// An event a plugin emits again about the same object is counted into the
// Event recorded before; another message, object or plugin is an Event of
// its own.
func TestRecordEventAggregates(t *testing.T) {
	svc := newWriteService(t)
	o := NewObjects(svc, quietLogger())
	ctx := context.Background()
	w := abi.ObjectRef{APIVersion: "example.setpoint.dev/v1", Kind: "Widget", Namespace: "default", Name: "w", UID: "uid-w"}
	v := abi.ObjectRef{APIVersion: "example.setpoint.dev/v1", Kind: "Widget", Namespace: "default", Name: "v", UID: "uid-v"}
	checked := abi.Event{Type: "Normal", Reason: "Checked", Message: "all good"}
	record := func(plugin string, ref abi.ObjectRef, ev abi.Event) {
		t.Helper()
		if err := o.RecordEvent(ctx, plugin, ref, ev); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		record("p", w, checked)
	}
	record("p", w, abi.Event{Type: "Warning", Reason: "Checked", Message: "all good"}) // another type
	record("p", w, abi.Event{Type: "Normal", Reason: "Checked", Message: "still good"})
	record("p", v, checked)
	record("q", w, checked)
	record("q", w, checked)

	list, err := svc.List(ctx, kinds.EventResource, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range list.Items {
		name, _, _ := unstructured.NestedString(e.Object, "involvedObject", "name")
		typ, _, _ := unstructured.NestedString(e.Object, "type")
		msg, _, _ := unstructured.NestedString(e.Object, "message")
		src, _, _ := unstructured.NestedString(e.Object, "source", "component")
		count, _, _ := unstructured.NestedInt64(e.Object, "count")
		got[src+" "+name+" "+typ+" "+msg] += count
		// As client-go's recorders report it: the source's component.
		if rc, _, _ := unstructured.NestedString(e.Object, "reportingComponent"); rc != src {
			t.Errorf("event %s: reportingComponent %q, want %q", e.GetName(), rc, src)
		}
		if count > 1 {
			first, _, _ := unstructured.NestedString(e.Object, "firstTimestamp")
			last, _, _ := unstructured.NestedString(e.Object, "lastTimestamp")
			if first == "" || last < first {
				t.Errorf("aggregated event: firstTimestamp %q, lastTimestamp %q", first, last)
			}
		}
	}
	want := map[string]int64{
		"plugin/p w Normal all good":   3,
		"plugin/p w Warning all good":  1,
		"plugin/p w Normal still good": 1,
		"plugin/p v Normal all good":   1,
		"plugin/q w Normal all good":   2,
	}
	if len(list.Items) != len(want) {
		t.Errorf("%d Events, want %d: %v", len(list.Items), len(want), got)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: count %d, want %d (all: %v)", k, got[k], n, got)
		}
	}

	// An aggregated Event deleted meanwhile is recorded anew.
	for _, e := range list.Items {
		if err := svc.Delete(ctx, kinds.EventResource, "default", e.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	record("p", w, checked)
	list, err = svc.List(ctx, kinds.EventResource, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d Events after deleting all and recording one, want 1", len(list.Items))
	}
	if count, _, _ := unstructured.NestedInt64(list.Items[0].Object, "count"); count != 1 {
		t.Errorf("count %d, want 1", count)
	}
}
