package engine

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// A mutating admitter cannot set the server-owned metadata: on create and
// on update the server's values are put back after the chain, whatever it
// returned, as a create without admission would have them.
func TestMutationCannotSetSystemFields(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	other, err := s.Create(ctx, widgets, widget("other", "small", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	past := metav1.NewTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	s.setAdmitter(AdmitterFuncs{MutateFunc: func(_ context.Context, req *AdmissionRequest) error {
		o := req.Object
		o.SetUID(other.GetUID())
		o.SetCreationTimestamp(past)
		o.SetDeletionTimestamp(&past)
		grace := int64(0)
		o.SetDeletionGracePeriodSeconds(&grace)
		o.SetResourceVersion("1")
		o.SetGeneration(99)
		o.SetSelfLink("/elsewhere")
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["mutated"] = "yes"
		o.SetLabels(labels)
		return nil
	}})
	check := func(t *testing.T, got *unstructured.Unstructured, uid types.UID, created metav1.Time, generation int64) {
		t.Helper()
		if got.GetLabels()["mutated"] != "yes" {
			t.Errorf("the mutation was not applied: labels %v", got.GetLabels())
		}
		if got.GetUID() != uid {
			t.Errorf("uid %q, want %q", got.GetUID(), uid)
		}
		if ts := got.GetCreationTimestamp(); !ts.Equal(&created) {
			t.Errorf("creationTimestamp %v, want %v", got.GetCreationTimestamp(), created)
		}
		if got.GetDeletionTimestamp() != nil || got.GetDeletionGracePeriodSeconds() != nil {
			t.Errorf("deletion fields %v %v, want none", got.GetDeletionTimestamp(), got.GetDeletionGracePeriodSeconds())
		}
		if got.GetGeneration() != generation {
			t.Errorf("generation %d, want %d", got.GetGeneration(), generation)
		}
		if got.GetResourceVersion() == "1" || got.GetSelfLink() != "" {
			t.Errorf("resourceVersion %q, selfLink %q", got.GetResourceVersion(), got.GetSelfLink())
		}
	}

	start := metav1.NewTime(time.Now().Add(-time.Minute))
	created, err := s.Create(ctx, widgets, widget("w", "small", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetUID() == other.GetUID() || created.GetUID() == "" || created.GetCreationTimestamp().Time.Before(start.Time) {
		t.Fatalf("create: uid %q (other %q), creationTimestamp %v", created.GetUID(), other.GetUID(), created.GetCreationTimestamp())
	}
	stored, err := s.Get(ctx, widgets, "default", "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, stored, created.GetUID(), created.GetCreationTimestamp(), 1)

	// An update that changes spec: generation goes up by one, from the
	// stored value, not from the plugin's.
	up := stored.DeepCopy()
	if err := unstructured.SetNestedField(up.Object, "large", "spec", "size"); err != nil {
		t.Fatal(err)
	}
	updated, err := s.Update(ctx, widgets, up, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, updated, created.GetUID(), created.GetCreationTimestamp(), 2)
	if updated.GetResourceVersion() == stored.GetResourceVersion() {
		t.Errorf("resourceVersion did not move")
	}
	again, err := s.Get(ctx, widgets, "default", "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, again, created.GetUID(), created.GetCreationTimestamp(), 2)
}
