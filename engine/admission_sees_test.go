package engine

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Mutating admission sees the server-owned metadata as the client sent
// it, as in kube-apiserver, where the registry fills it after admission
// (rest.BeforeCreate, rest.BeforeUpdate): on a create a fresh object has
// no uid nor creationTimestamp yet; on an update of an object sent
// without them (kubectl replace of a manifest) neither, though the client
// may send the stored ones. The stored object has the server's values
// either way.
func TestMutationSeesSystemFieldsAsSent(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	type seen struct{ uid, created string }
	var got []seen
	s.setAdmitter(AdmitterFuncs{MutateFunc: func(_ context.Context, req *AdmissionRequest) error {
		md, _ := req.Object.Object["metadata"].(map[string]any)
		uid, _ := md["uid"].(string)
		created, _ := md["creationTimestamp"].(string)
		got = append(got, seen{uid, created})
		return nil
	}})
	created, err := s.Create(ctx, widgets, widget("w", "small", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetUID() == "" || created.GetCreationTimestamp().Time.IsZero() {
		t.Fatalf("created without uid or creationTimestamp: %v", created.Object["metadata"])
	}
	up := widget("w", "large", nil)
	up.SetResourceVersion(created.GetResourceVersion())
	updated, err := s.Update(ctx, widgets, up, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.GetUID() != created.GetUID() || !updated.GetCreationTimestamp().Time.Equal(created.GetCreationTimestamp().Time) {
		t.Errorf("updated has uid %q, creationTimestamp %v; want the created %q, %v", updated.GetUID(), updated.GetCreationTimestamp(), created.GetUID(), created.GetCreationTimestamp())
	}
	sent := updated.DeepCopy()
	if err := unstructured.SetNestedField(sent.Object, "small", "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, widgets, sent, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ts := created.GetCreationTimestamp().UTC().Format("2006-01-02T15:04:05Z")
	want := []seen{{"", ""}, {"", ""}, {string(created.GetUID()), ts}}
	if len(got) != len(want) {
		t.Fatalf("admission saw %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("write %d: admission saw uid %q, creationTimestamp %q; want %q, %q", i, got[i].uid, got[i].created, want[i].uid, want[i].created)
		}
	}
}
