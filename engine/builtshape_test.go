package engine

import (
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// TestBuiltShapeStoresTheSame: an Event written with kinds.WithBuiltShape
// (not decoded again) is stored exactly as the same Event written as a
// request body is, when it was built in the shape the kind stores, on
// create and on update.
func TestBuiltShapeStoresTheSame(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	// What the controller builds: corev1.Event's encoding (TestEventBuiltShape).
	event := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Event",
			"metadata":       map[string]any{"name": name, "namespace": "default"},
			"involvedObject": map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget", "name": "w", "namespace": "default"},
			"type":           "Normal", "reason": "Provisioned", "message": "ready", "count": int64(1),
			"eventTime": nil, "firstTimestamp": "2026-11-27T03:00:00Z", "lastTimestamp": "2026-11-27T03:00:00Z",
			"source":             map[string]any{"component": "setpoint/widget", "host": "h"},
			"reportingComponent": "setpoint/widget", "reportingInstance": "h",
		}}
	}
	body := func(u *unstructured.Unstructured) map[string]any {
		out := map[string]any{}
		for k, v := range u.Object {
			if k != "metadata" {
				out[k] = v
			}
		}
		return out
	}
	plain, err := s.Create(ctx, kinds.EventResource, event("plain"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	built, err := s.Create(kinds.WithBuiltShape(ctx), kinds.EventResource, event("built"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(body(plain), body(built)) {
		t.Errorf("stored differently:\n request body: %v\n built shape:  %v", body(plain), body(built))
	}
	got, err := s.Get(ctx, kinds.EventResource, "default", "built", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(body(got), body(plain)) {
		t.Errorf("read back differently:\n %v\nwant %v", body(got), body(plain))
	}

	// An update with the mark, as the event aggregator's count, too.
	next := built.DeepCopy()
	next.Object["count"] = int64(2)
	updated, err := s.Update(kinds.WithBuiltShape(ctx), kinds.EventResource, next, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Object["count"] != int64(2) || !reflect.DeepEqual(updated.Object["source"], plain.Object["source"]) {
		t.Errorf("updated = %v", updated.Object)
	}
}
