package kinds

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// eventTable converts Events to the table kube-apiserver serves for them
// (its printer for core/v1 Events): LAST SEEN, TYPE, REASON, OBJECT as
// kind/name, MESSAGE, and with -o wide SUBOBJECT, SOURCE, FIRST SEEN, COUNT
// and NAME.
type eventTable struct {
	now func() time.Time
}

var eventColumns = func() []metav1.TableColumnDefinition {
	doc := corev1.Event{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"]},
		{Name: "Type", Type: "string", Description: doc["type"]},
		{Name: "Reason", Type: "string", Description: doc["reason"]},
		{Name: "Object", Type: "string", Description: doc["involvedObject"]},
		{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
		{Name: "Source", Type: "string", Priority: 1, Description: doc["source"]},
		{Name: "Message", Type: "string", Description: doc["message"]},
		{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"]},
		{Name: "Count", Type: "string", Priority: 1, Description: doc["count"]},
		{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	}
}()

// ConvertToTable implements rest.TableConvertor for an Event or a list of
// them.
func (t eventTable) ConvertToTable(_ context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	table, items, err := newTable(obj, opts, eventColumns)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	for _, item := range items {
		ev := &corev1.Event{}
		u, ok := item.(runtime.Unstructured)
		if !ok {
			return nil, fmt.Errorf("event table: unexpected %T", item)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), ev); err != nil {
			return nil, fmt.Errorf("event table: %w", err)
		}
		table.Rows = append(table.Rows, metav1.TableRow{
			Cells:  eventCells(ev, now()),
			Object: runtime.RawExtension{Object: item},
		})
	}
	return table, nil
}

// eventCells are an Event's cells, as kube-apiserver prints them.
func eventCells(ev *corev1.Event, now time.Time) []any {
	since := func(t time.Time) string {
		if t.IsZero() {
			return "<unknown>"
		}
		return duration.HumanDuration(now.Sub(t))
	}
	first := since(ev.FirstTimestamp.Time)
	if ev.FirstTimestamp.IsZero() {
		first = since(ev.EventTime.Time)
	}
	last := since(ev.LastTimestamp.Time)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last = since(ev.Series.LastObservedTime.Time)
		count = ev.Series.Count
	} else if count == 0 {
		count = 1 // a singleton event of the events.k8s.io API
	}
	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target += "/" + ev.InvolvedObject.Name
	}
	component, instance := ev.Source.Component, ev.Source.Host
	if component == "" {
		component = ev.ReportingController
	}
	if instance == "" {
		instance = ev.ReportingInstance
	}
	source := component
	if instance != "" {
		source += ", " + instance
	}
	return []any{last, ev.Type, ev.Reason, target, ev.InvolvedObject.FieldPath, source,
		strings.TrimSpace(ev.Message), first, int64(count), ev.Name}
}

// newTable starts the Table of obj, an object or a list, for a
// TableConvertor: columns unless opts asks for no headers, the list's
// resourceVersion, continue token and remaining count, and obj's items.
func newTable(obj, opts runtime.Object, columns []metav1.TableColumnDefinition) (*metav1.Table, []runtime.Object, error) {
	table := &metav1.Table{}
	if o, ok := opts.(*metav1.TableOptions); !ok || o == nil || !o.NoHeaders {
		table.ColumnDefinitions = columns
	}
	var items []runtime.Object
	if meta.IsListType(obj) {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return nil, nil, err
		}
		if m, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
			table.Continue = m.GetContinue()
			table.RemainingItemCount = m.GetRemainingItemCount()
		}
	} else {
		items = []runtime.Object{obj}
		if m, err := meta.CommonAccessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}
	return table, items, nil
}
