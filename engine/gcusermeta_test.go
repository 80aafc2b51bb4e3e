package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const freeFormCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: notes.example.setpoint.dev
spec:
  group: example.setpoint.dev
  scope: Namespaced
  names: {plural: notes, singular: note, kind: Note, listKind: NoteList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// A top-level key that differs from "metadata" only by case is the user's
// data (kept by x-kubernetes-preserve-unknown-fields): owner references in
// it must not get an object with no owner collected, neither by the graph
// nor by the sweep.
func TestGCIgnoresUserDataThatLooksLikeMetadata(t *testing.T) {
	ctx := context.Background()
	s, _ := newGCService(t, true)
	if _, err := s.Create(ctx, CRDResource, fromYAML(t, freeFormCRD), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	notes := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "notes"}
	eventually(t, "notes served", func() bool { return s.servedGR(notes.GroupResource()) != nil })
	for i, key := range []string{"METADATA", "Metadata"} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.setpoint.dev/v1", "kind": "Note",
			"metadata": map[string]any{"name": fmt.Sprintf("victim-%d", i), "namespace": "default"},
			key: map[string]any{
				"ownerReferences": []any{map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget", "name": "ghost", "uid": "ghost-uid"}},
			},
		}}
		created, err := s.Create(ctx, notes, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(created.GetOwnerReferences()) != 0 || created.Object[key] == nil {
			t.Fatalf("stored %s: ownerReferences %v, %s kept %v", key, created.GetOwnerReferences(), key, created.Object[key] != nil)
		}
	}
	gcSynced(t, s)
	time.Sleep(300 * time.Millisecond) // the collector's workers have had their turn
	if _, err := s.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"METADATA", "Metadata"} {
		if _, err := s.Get(ctx, notes, "default", fmt.Sprintf("victim-%d", i), metav1.GetOptions{}); err != nil {
			t.Errorf("an object with no owner references, holding a %s member, was collected: %v", key, err)
		}
	}
}
