package engine

// /scale writes in managedFields (review finding 11).

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// Finding 11: /scale writes are recorded with the subresource "scale".
func TestScaleRecordedAsSubresource(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	if _, err := s.Create(ctx, kinds.CRDResource, gadgetCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := []byte(`{"apiVersion":"test.setpoint.dev/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"replicas":2}}`)
	if _, _, err := s.Apply(ctx, gadgetsV1, "", "g1", cfg, applyOpts("deployer", false)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Patch(ctx, gadgetsV1, "", "g1", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`),
		metav1.PatchOptions{FieldManager: "autoscaler"}, "scale"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, gadgetsV1, "", "g1", metav1.GetOptions{})
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 5 {
		t.Errorf("replicas = %d", r)
	}
	var scaleEntry *metav1.ManagedFieldsEntry
	for _, e := range got.GetManagedFields() {
		if e.Manager == "autoscaler" {
			scaleEntry = &e
		}
	}
	if scaleEntry == nil || scaleEntry.Subresource != "scale" || scaleEntry.Operation != metav1.ManagedFieldsOperationUpdate {
		t.Fatalf("managers = %v, want autoscaler/Update/scale", managers(got))
	}
	if fs := string(scaleEntry.FieldsV1.Raw); !strings.Contains(fs, `"f:replicas"`) {
		t.Errorf("autoscaler's fields = %s, want spec.replicas", fs)
	}
	// The apply's owner lost spec.replicas: re-applying its value conflicts.
	cfg = []byte(`{"apiVersion":"test.setpoint.dev/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"replicas":3}}`)
	if _, _, err := s.Apply(ctx, gadgetsV1, "", "g1", cfg, applyOpts("deployer", false)); !apierrors.IsConflict(err) {
		t.Errorf("apply of replicas after a scale = %v, want a conflict with autoscaler", err)
	}
	// An update through /scale (not a patch) is recorded the same way.
	sc, err := s.GetScale(ctx, gadgetsV1, "", "g1")
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(sc.Object, int64(7), "spec", "replicas")
	if _, err := s.UpdateScale(ctx, gadgetsV1, "", "g1", sc, metav1.UpdateOptions{FieldManager: "hpa"}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Get(ctx, gadgetsV1, "", "g1", metav1.GetOptions{})
	if m := strings.Join(managers(got), ","); !strings.Contains(m, "hpa/Update/scale") {
		t.Errorf("managers = %v, want hpa/Update/scale", m)
	}
	// A stale resourceVersion in the Scale is still a conflict.
	if _, err := s.UpdateScale(ctx, gadgetsV1, "", "g1", sc, metav1.UpdateOptions{FieldManager: "hpa"}); !apierrors.IsConflict(err) {
		t.Errorf("stale Scale = %v, want a conflict", err)
	}
}
