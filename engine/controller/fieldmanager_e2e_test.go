package controller_test

import (
	"testing"
	"testing/synctest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestControllerWritesAreNamedInManagedFields: on an object a user applies
// server-side, the controller's status write is recorded under its field
// manager, beside the user's apply, and never under an empty name.
func TestControllerWritesAreNamedInManagedFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newEngine(t)
		_, stop := runManager(t, newController(t, s, "widget", &gizmoPlugin{state: "Provisioned"}, nil))
		defer stop()
		applied := `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"},"spec":{"name":"w","size":"small"}}`
		if _, _, err := s.Apply(t.Context(), widgets, "default", "w", []byte(applied), metav1.PatchOptions{FieldManager: "user"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !isReady(t, s, "w") {
			t.Fatal("w not Ready")
		}
		managers := map[string]metav1.ManagedFieldsEntry{}
		for _, e := range get(t, s, widgets, "w").GetManagedFields() {
			if e.Manager == "" {
				t.Errorf("an entry without a manager: %+v", e)
			}
			managers[e.Manager+"/"+e.Subresource] = e
		}
		if e, ok := managers["user/"]; !ok || e.Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("no Apply entry of the user in %v", managers)
		}
		if e, ok := managers["setpoint-controller/widget/status"]; !ok || e.Operation != metav1.ManagedFieldsOperationUpdate {
			t.Errorf("no status Update entry of setpoint-controller/widget in %v", managers)
		}
	})
}
