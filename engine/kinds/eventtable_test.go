package kinds

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestEventTable checks the columns and cells of Events' table against what
// kube-apiserver prints for them.
func TestEventTable(t *testing.T) {
	ctx := context.Background()
	l := &unstructured.UnstructuredList{}
	l.SetResourceVersion("7")
	for _, doc := range []string{
		"apiVersion: v1\nkind: Event\nmetadata: {name: e1, namespace: default}\ninvolvedObject: {kind: Widget, name: w1, namespace: default, fieldPath: spec.size}\n" +
			"reason: Provisioned\ntype: Normal\nmessage: \" done \"\ncount: 3\nsource: {component: widget}\n" +
			"firstTimestamp: \"2026-11-21T10:00:00Z\"\nlastTimestamp: \"2026-11-21T10:55:00Z\"\n",
		"apiVersion: v1\nkind: Event\nmetadata: {name: e2, namespace: default}\ninvolvedObject: {kind: Namespace}\n" +
			"reason: Started\ntype: Warning\nmessage: m\nreportingComponent: setpoint\nreportingInstance: host-1\neventTime: \"2026-11-21T10:59:30.000000Z\"\n",
	} {
		l.Items = append(l.Items, *kindstest.FromYAML(t, doc))
	}
	now, _ := time.Parse(time.RFC3339, "2026-11-21T11:00:00Z")
	tbl, err := eventTable{now: func() time.Time { return now }}.ConvertToTable(ctx, l, &metav1.TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range tbl.ColumnDefinitions {
		if c.Priority == 0 {
			names = append(names, c.Name)
		}
	}
	if want := []string{"Last Seen", "Type", "Reason", "Object", "Message"}; !reflect.DeepEqual(names, want) {
		t.Errorf("columns %v, want %v", names, want)
	}
	want := [][]any{
		{"5m", "Normal", "Provisioned", "widget/w1", "spec.size", "widget", "done", "60m", int64(3), "e1"},
		{"30s", "Warning", "Started", "namespace", "", "setpoint, host-1", "m", "30s", int64(1), "e2"},
	}
	if len(tbl.Rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(tbl.Rows), len(want))
	}
	for i, r := range tbl.Rows {
		if !reflect.DeepEqual(r.Cells, want[i]) {
			t.Errorf("row %d: %v, want %v", i, r.Cells, want[i])
		}
		if _, ok := r.Object.Object.(*unstructured.Unstructured); !ok {
			t.Errorf("row %d object %T", i, r.Object.Object)
		}
	}
	if tbl.ResourceVersion != l.GetResourceVersion() {
		t.Errorf("table resourceVersion %q, want %q", tbl.ResourceVersion, l.GetResourceVersion())
	}
	// The registry serves it for Events.
	k, _ := NewRegistry().Get(EventResource)
	if tbl, err := k.ConvertToTable(ctx, l, &metav1.TableOptions{}); err != nil || len(tbl.ColumnDefinitions) != len(eventColumns) {
		t.Errorf("registry table: %v, %v", tbl, err)
	}
}
