package engine

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// TestUpdateGenerationAfterMutatingAdmission: on update, mutating admission
// sees the metadata.generation the client sent, as a webhook of
// kube-apiserver sees it (rest.BeforeUpdate puts the stored one back after
// admission); what is stored is counted from the stored generation
// whatever the client or admission set: one more for a custom resource
// whose spec changed, the stored one for a ConfigMap, whose strategy counts
// none.
func TestUpdateGenerationAfterMutatingAdmission(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	var seen int64
	s.setAdmitter(AdmitterFuncs{MutateFunc: func(_ context.Context, req *AdmissionRequest) error {
		if req.Operation == OpUpdate {
			seen = req.Object.GetGeneration()
			req.Object.SetGeneration(40) // not the admission's to set
		}
		return nil
	}})

	w := mustCreate(t, s, widget("w", "small", nil))
	_ = unstructured.SetNestedField(w.Object, "large", "spec", "size")
	w.SetGeneration(7)
	out, err := s.Update(ctx, widgets, w, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if seen != 7 || out.GetGeneration() != 2 {
		t.Errorf("widget update: admission saw generation %d, want 7 (the client's); stored %d, want 2", seen, out.GetGeneration())
	}

	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "default", "generation": int64(3)}, "data": map[string]any{"a": "1"}}}
	out, err = s.Create(ctx, kinds.ConfigMapResource, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(out.Object, "2", "data", "a")
	out.SetGeneration(5)
	if out, err = s.Update(ctx, kinds.ConfigMapResource, out, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if seen != 5 || out.GetGeneration() != 3 {
		t.Errorf("configmap update: admission saw generation %d, want 5 (the client's); stored %d, want 3", seen, out.GetGeneration())
	}
}
