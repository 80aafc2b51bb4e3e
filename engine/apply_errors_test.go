package engine

// Status codes of field-manager errors (review finding 12).

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// Finding 12: a field-manager error that comes from the stored object is
// the server's (500); one in the applied configuration is the client's (400).
func TestApplyErrorStatus(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	if _, err := s.Create(ctx, kinds.CRDResource, thingCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, things, "default", "t1", appliedThing(`{"a":"1"}`), applyOpts("m1", false)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, things, "default", "t1", appliedThing(`{"a":1}`), applyOpts("m1", false)); !apierrors.IsBadRequest(err) {
		t.Errorf("applied configuration of the wrong type = %v, want 400", err)
	}
	if _, _, err := s.Apply(ctx, things, "default", "t1", appliedThing(`{"zz":"1"}`), applyOpts("m1", false)); !apierrors.IsBadRequest(err) {
		t.Errorf("applied configuration with an undeclared field = %v, want 400", err)
	}
	// Stored data the schema does not type (written behind the API's back).
	sv := s.reg.ByGroupResource(things.GroupResource())
	k := key(sv, "default", "t1")
	kv, err := s.store.Get(ctx, k, store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live, err := sv.Decode(kv)
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(live.Object, int64(5), "spec", "a")
	b, err := sv.Encode(live)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Update(ctx, k, b, kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Apply(ctx, things, "default", "t1", appliedThing(`{"b":"1"}`), applyOpts("m2", false))
	if !apierrors.IsInternalError(err) {
		t.Errorf("apply over a stored object the schema cannot type = %v, want 500", err)
	}
}
