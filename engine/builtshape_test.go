package engine

import (
	"context"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// TestBuiltShapeMutatedCoercedWhole: an Event written with
// kinds.WithBuiltShape that a mutating admission changes is coerced as a
// request body is: the nested unknown fields the mutation added are
// dropped, the fields it removed come back in the stored shape, and a
// value of the wrong type is refused with the decoder's 400, on create and
// on update.
func TestBuiltShapeMutatedCoercedWhole(t *testing.T) {
	s := newService(t)
	ctx := kinds.WithBuiltShape(context.Background())
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
	var mutate func(obj map[string]any)
	s.setAdmitter(AdmitterFuncs{MutateFunc: func(_ context.Context, req *AdmissionRequest) error {
		if mutate != nil {
			mutate(req.Object.Object)
		}
		return nil
	}})
	unknownAndMissing := func(obj map[string]any) {
		obj["involvedObject"].(map[string]any)["podName"] = "p"
		obj["source"].(map[string]any)["comp"] = "c"
		delete(obj, "reportingInstance")
	}
	check := func(t *testing.T, got *unstructured.Unstructured) {
		t.Helper()
		if _, ok := got.Object["involvedObject"].(map[string]any)["podName"]; ok {
			t.Errorf("involvedObject kept the unknown field the mutation added: %v", got.Object["involvedObject"])
		}
		if _, ok := got.Object["source"].(map[string]any)["comp"]; ok {
			t.Errorf("source kept the unknown field the mutation added: %v", got.Object["source"])
		}
		if v, ok := got.Object["reportingInstance"]; !ok || v != "" {
			t.Errorf("reportingInstance = %v (present %v), want \"\" as corev1.Event encodes it", v, ok)
		}
	}
	const mistyped = `Event in version "v1" cannot be handled as a Event: json: cannot unmarshal string into Go struct field Event.count of type int32`
	wrongType := func(obj map[string]any) { obj["count"] = "many" }

	mutate = unknownAndMissing
	created, err := s.Create(ctx, kinds.EventResource, event("e1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, created)
	mutate = wrongType
	if _, err := s.Create(ctx, kinds.EventResource, event("e2"), metav1.CreateOptions{}); !apierrors.IsBadRequest(err) || err.Error() != mistyped {
		t.Errorf("create mutated to a wrong type: %v, want BadRequest %q", err, mistyped)
	}

	mutate = nil
	stored, err := s.Create(ctx, kinds.EventResource, event("e3"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := stored.DeepCopy()
	next.Object["count"] = int64(2)
	mutate = unknownAndMissing
	updated, err := s.Update(ctx, kinds.EventResource, next, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, updated)
	mutate = wrongType
	if _, err := s.Update(ctx, kinds.EventResource, updated, metav1.UpdateOptions{}); !apierrors.IsBadRequest(err) || err.Error() != mistyped {
		t.Errorf("update mutated to a wrong type: %v, want BadRequest %q", err, mistyped)
	}
}
