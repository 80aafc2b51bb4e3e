package kinds

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestEventsV1Table prints an events.k8s.io/v1 Event with the cells of the
// same Event printed through core/v1, the row holding the v1 object.
func TestEventsV1Table(t *testing.T) {
	now := time.Date(2026, 1, 2, 4, 4, 5, 0, time.UTC)
	v1 := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "events.k8s.io/v1", "kind": "Event",
		"metadata":  map[string]any{"name": "e", "namespace": "default"},
		"regarding": map[string]any{"kind": "Pod", "name": "q", "fieldPath": "spec"},
		"eventTime": "2026-01-02T03:04:05.000001Z", "reason": "Scaled", "note": "scaled it", "type": "Warning",
		"reportingController": "example.com/ctl", "deprecatedCount": int64(4),
	}}
	core, err := v1EventToCore(v1.Object)
	if err != nil {
		t.Fatal(err)
	}
	want, err := eventTable{now: func() time.Time { return now }}.ConvertToTable(context.Background(), &unstructured.Unstructured{Object: core}, nil)
	if err != nil {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{}, Items: []unstructured.Unstructured{*v1}}
	got, err := eventsV1Table{eventTable{now: func() time.Time { return now }}}.ConvertToTable(context.Background(), list, &metav1.TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 1 || !reflect.DeepEqual(got.Rows[0].Cells, want.Rows[0].Cells) || got.Rows[0].Object.Object.(*unstructured.Unstructured) != &list.Items[0] {
		t.Fatalf("events.k8s.io/v1 row %+v, want cells %v", got.Rows, want.Rows[0].Cells)
	}
	if got.Rows[0].Cells[3] != "pod/q" || got.Rows[0].Cells[8] != int64(4) {
		t.Errorf("cells %v: want object pod/q, count 4", got.Rows[0].Cells)
	}
}

// TestCanonicalEventsV1 checks that the typed round trip of an
// events.k8s.io/v1 Event gives what converting its map to core/v1 and
// back gives, as the view's reads and writes convert it: times cut to
// their precision, unset fields as their types encode them, every field
// in its place.
func TestCanonicalEventsV1(t *testing.T) {
	for name, body := range map[string]map[string]any{
		"empty": {},
		"new-style": {
			"regarding": map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget", "namespace": "default", "name": "w", "uid": "u1"},
			"related":   map[string]any{"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
			"eventTime": "2026-01-02T03:04:05.123456Z", "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
			"action": "Scale", "reason": "Scaled", "note": "scaled it", "type": "Normal",
			"series": map[string]any{"count": int64(3), "lastObservedTime": "2026-01-02T04:04:05.500000+02:00"},
		},
		"deprecated fields": {
			"regarding": map[string]any{"kind": "Node", "name": "n"}, "reason": "R", "note": "n",
			"deprecatedSource":         map[string]any{"component": "c", "host": "h"},
			"deprecatedFirstTimestamp": "2026-01-02T03:04:05.75Z", "deprecatedLastTimestamp": "2026-01-02T05:04:05+01:00",
			"deprecatedCount": int64(7), "series": nil, "related": nil,
		},
	} {
		t.Run(name, func(t *testing.T) {
			core, err := v1EventToCore(body)
			if err != nil {
				t.Fatal(err)
			}
			want, err := coreEventToV1(core)
			if err != nil {
				t.Fatal(err)
			}
			got, err := canonicalEventsV1(body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("canonical (-through maps +typed):\n%s", diff)
			}
		})
	}
}
