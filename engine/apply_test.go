package engine

import (
	"context"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// applied returns a Widget's applied configuration as JSON.
func appliedWidget(name, display, size string) []byte {
	return []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"` + name +
		`","namespace":"default"},"spec":{"name":"` + display + `","size":"` + size + `"}}`)
}

func applyOpts(manager string, force bool) metav1.PatchOptions {
	o := metav1.PatchOptions{FieldManager: manager}
	if force {
		o.Force = &force
	}
	return o
}

// managers returns the managers of obj's managedFields by operation and
// subresource, as "manager/operation[/subresource]".
func managers(obj *unstructured.Unstructured) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		s := e.Manager + "/" + string(e.Operation)
		if e.Subresource != "" {
			s += "/" + e.Subresource
		}
		out = append(out, s)
	}
	return out
}

func TestApply(t *testing.T) {
	ctx := context.Background()
	s := newService(t)

	// Create.
	obj, created, err := s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "small"), applyOpts("alice", false))
	if err != nil || !created {
		t.Fatalf("apply create: created=%v err=%v", created, err)
	}
	if got := managers(obj); len(got) != 1 || got[0] != "alice/Apply" {
		t.Fatalf("managers after create: %v", got)
	}
	rv1 := obj.GetResourceVersion()
	if obj.GetUID() == "" || rv1 == "" || obj.GetGeneration() != 1 {
		t.Fatalf("created object lacks server metadata: %v", obj.Object["metadata"])
	}

	// Re-apply unchanged: nothing written.
	obj, created, err = s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "small"), applyOpts("alice", false))
	if err != nil || created {
		t.Fatalf("re-apply: created=%v err=%v", created, err)
	}
	if obj.GetResourceVersion() != rv1 {
		t.Fatalf("unchanged apply wrote: rv %s -> %s", rv1, obj.GetResourceVersion())
	}

	// Re-apply with a change.
	obj, _, err = s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "medium"), applyOpts("alice", false))
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedString(obj.Object, "spec", "size"); size != "medium" || obj.GetResourceVersion() == rv1 || obj.GetGeneration() != 2 {
		t.Fatalf("re-apply with a change: size %q rv %s generation %d", size, obj.GetResourceVersion(), obj.GetGeneration())
	}

	// Another manager changing alice's field conflicts, one cause per field.
	_, _, err = s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "B", "large"), applyOpts("bob", false))
	if !apierrors.IsConflict(err) {
		t.Fatalf("conflicting apply: want 409, got %v", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Details == nil || len(st.Details.Causes) != 2 {
		t.Fatalf("conflict causes: %+v", st.Details)
	}
	for _, c := range st.Details.Causes {
		if c.Type != metav1.CauseTypeFieldManagerConflict {
			t.Errorf("cause %+v: want type %s", c, metav1.CauseTypeFieldManagerConflict)
		}
	}
	// The same values are no conflict: bob shares ownership.
	if _, _, err := s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "medium"), applyOpts("bob", false)); err != nil {
		t.Fatalf("apply of the same values: %v", err)
	}

	// force takes ownership.
	obj, _, err = s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "B", "large"), applyOpts("carol", true))
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if size, _, _ := unstructured.NestedString(obj.Object, "spec", "size"); size != "large" {
		t.Fatalf("forced apply: size %q", size)
	}

	// Removing a field from one's applied config removes it when nobody
	// else owns it.
	withLabel := []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","labels":{"team":"x"}}}`)
	obj, _, err = s.Apply(ctx, widgets, "default", "a", withLabel, applyOpts("dave", false))
	if err != nil || obj.GetLabels()["team"] != "x" {
		t.Fatalf("apply label: %v %v", obj.GetLabels(), err)
	}
	obj, _, err = s.Apply(ctx, widgets, "default", "a", []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"}}`), applyOpts("dave", false))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := obj.GetLabels()["team"]; ok {
		t.Fatalf("label still there after dave stopped applying it: %v", obj.GetLabels())
	}
	got, err := s.Get(ctx, widgets, "default", "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedString(got.Object, "spec", "size"); size != "large" || len(got.GetManagedFields()) == 0 {
		t.Fatalf("stored object: size %q managedFields %v", size, got.GetManagedFields())
	}
}

func TestApplyOptions(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	tests := []struct {
		name string
		data string
		opts metav1.PatchOptions
		code int32
	}{
		{name: "no field manager", data: string(appliedWidget("a", "A", "small")), code: http.StatusUnprocessableEntity},
		{name: "not an object", data: `[1]`, opts: applyOpts("m", false), code: http.StatusBadRequest},
		{name: "wrong name", data: string(appliedWidget("b", "A", "small")), opts: applyOpts("m", false), code: http.StatusBadRequest},
		{name: "undeclared field", data: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"name":"A","size":"small","colour":"red"}}`, opts: applyOpts("m", false), code: http.StatusBadRequest},
		{name: "invalid", data: string(appliedWidget("a", "A", "huge")), opts: applyOpts("m", false), code: http.StatusUnprocessableEntity},
		{name: "managedFields set", data: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","managedFields":[{"manager":"x"}]}}`, opts: applyOpts("m", false), code: http.StatusBadRequest},
		{name: "resourceVersion of a missing object", data: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","resourceVersion":"5"},"spec":{"name":"A","size":"small"}}`, opts: applyOpts("m", false), code: http.StatusConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Apply(ctx, widgets, "default", "a", []byte(tc.data), tc.opts)
			if code := apierrors.ReasonForError(err); err == nil || err.(apierrors.APIStatus).Status().Code != tc.code {
				t.Fatalf("want %d, got %v (%s)", tc.code, err, code)
			}
		})
	}
	if _, err := s.Get(ctx, widgets, "default", "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a failed apply stored an object: %v", err)
	}
	// A namespaced object needs its namespace.
	noNS := []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"name":"A","size":"small"}}`)
	if _, _, err := s.Apply(ctx, widgets, "nowhere", "a", noNS, applyOpts("m", false)); !apierrors.IsNotFound(err) {
		t.Fatalf("apply in a missing namespace: %v", err)
	}
	// force is for apply only.
	force := true
	if _, err := s.Patch(ctx, widgets, "default", "a", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{Force: &force}); !apierrors.IsInvalid(err) {
		t.Fatalf("merge patch with force: %v", err)
	}
}

func TestApplyDryRunAndPrecondition(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	dry := applyOpts("m", false)
	dry.DryRun = []string{metav1.DryRunAll}
	obj, created, err := s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "small"), dry)
	if err != nil || !created || len(obj.GetManagedFields()) != 1 {
		t.Fatalf("dry-run create: %v %v %v", created, err, obj)
	}
	if _, err := s.Get(ctx, widgets, "default", "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry-run apply stored the object: %v", err)
	}
	stored, _, err := s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "small"), applyOpts("m", false))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err = s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "large"), dry)
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedString(obj.Object, "spec", "size"); size != "large" {
		t.Fatalf("dry-run apply answered size %q", size)
	}
	got, _ := s.Get(ctx, widgets, "default", "a", metav1.GetOptions{})
	if size, _, _ := unstructured.NestedString(got.Object, "spec", "size"); size != "small" || got.GetResourceVersion() != stored.GetResourceVersion() {
		t.Fatalf("dry-run apply changed the object: %s rv %s", size, got.GetResourceVersion())
	}
	// A resourceVersion in the applied config is a precondition.
	stale := []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","resourceVersion":"1"},"spec":{"name":"A","size":"large"}}`)
	if _, _, err := s.Apply(ctx, widgets, "default", "a", stale, applyOpts("m", false)); !apierrors.IsConflict(err) {
		t.Fatalf("stale resourceVersion: %v", err)
	}
	fresh := []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","resourceVersion":"` + stored.GetResourceVersion() + `"},"spec":{"name":"A","size":"large"}}`)
	if _, _, err := s.Apply(ctx, widgets, "default", "a", fresh, applyOpts("m", false)); err != nil {
		t.Fatalf("current resourceVersion: %v", err)
	}
}

func TestApplyStatus(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	if _, _, err := s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "small"), applyOpts("user", false), "status"); !apierrors.IsNotFound(err) {
		t.Fatalf("status apply to a missing object: %v", err)
	}
	if _, _, err := s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "small"), applyOpts("user", false)); err != nil {
		t.Fatal(err)
	}
	status := []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"name":"ignored","size":"large"},"status":{"state":"Ready"}}`)
	obj, _, err := s.Apply(ctx, widgets, "default", "a", status, applyOpts("controller", false), "status")
	if err != nil {
		t.Fatal(err)
	}
	if st, _, _ := unstructured.NestedString(obj.Object, "status", "state"); st != "Ready" {
		t.Fatalf("status.state %q", st)
	}
	if size, _, _ := unstructured.NestedString(obj.Object, "spec", "size"); size != "small" {
		t.Fatalf("status apply changed spec.size to %q", size)
	}
	want := map[string]bool{"user/Apply": true, "controller/Apply/status": true}
	for _, m := range managers(obj) {
		delete(want, m)
	}
	if len(want) != 0 {
		t.Fatalf("managers %v lack %v", managers(obj), want)
	}
	// A spec apply does not take status.
	obj, _, err = s.Apply(ctx, widgets, "default", "a", []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"name":"A","size":"small"},"status":{"state":"Gone"}}`), applyOpts("user", false))
	if err != nil {
		t.Fatal(err)
	}
	if st, _, _ := unstructured.NestedString(obj.Object, "status", "state"); st != "Ready" {
		t.Fatalf("spec apply changed status.state to %q", st)
	}
}

func TestManagedFieldsOfUpdates(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	// An object nobody applied is not tracked (docs/RATIONALE.md), and the
	// managedFields a client sends are not kept.
	forged := widget("b", "small", nil)
	forged.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "forger", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "example.setpoint.dev/v1"}})
	obj, err := s.Create(ctx, widgets, forged, metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(obj); len(got) != 0 {
		t.Fatalf("managers after a create: %v", got)
	}
	obj.SetManagedFields(forged.GetManagedFields())
	obj.SetLabels(map[string]string{"x": "y"})
	if obj, err = s.Update(ctx, widgets, obj, metav1.UpdateOptions{FieldManager: "updater"}); err != nil {
		t.Fatal(err)
	}
	if got := managers(obj); len(got) != 0 {
		t.Fatalf("managers after an update of an untracked object: %v", got)
	}

	// An applied object is: every write is recorded as an Update.
	obj, _, err = s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "W a", "small"), applyOpts("creator", false))
	if err != nil {
		t.Fatal(err)
	}
	obj, err = s.Patch(ctx, widgets, "default", "a", types.MergePatchType, []byte(`{"spec":{"size":"large"}}`), metav1.PatchOptions{FieldManager: "patcher"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(obj); len(got) != 2 || got[0] != "creator/Apply" || got[1] != "patcher/Update" {
		t.Fatalf("managers after a patch: %v", got)
	}
	obj.Object["status"] = map[string]any{"state": "Ready"}
	obj, err = s.UpdateStatus(ctx, widgets, obj, metav1.UpdateOptions{FieldManager: "statuser"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(obj); len(got) != 3 || got[2] != "statuser/Update/status" {
		t.Fatalf("managers after a status update: %v", got)
	}
	// An update that changes nothing writes nothing.
	rv := obj.GetResourceVersion()
	obj, err = s.Update(ctx, widgets, obj, metav1.UpdateOptions{FieldManager: "other"})
	if err != nil || obj.GetResourceVersion() != rv {
		t.Fatalf("no-op update: rv %s -> %s, %v", rv, obj.GetResourceVersion(), err)
	}
	// An applier conflicts with the patcher's field.
	if _, _, err = s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "W a", "small"), applyOpts("applier", false)); !apierrors.IsConflict(err) {
		t.Fatalf("apply over an updated field: %v", err)
	}
	// As in Kubernetes, an update may reset managedFields with an empty
	// list; the object is then not tracked until someone applies.
	obj.SetLabels(map[string]string{"x": "y"})
	obj.Object["metadata"].(map[string]any)["managedFields"] = []any{}
	obj, err = s.Update(ctx, widgets, obj, metav1.UpdateOptions{FieldManager: "updater"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(obj); len(got) != 0 {
		t.Fatalf("managers after a reset: %v", got)
	}
	// The first apply then finds what is there owned by
	// "before-first-apply", as in Kubernetes.
	if _, _, err = s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "W a", "small"), applyOpts("applier", false)); !apierrors.IsConflict(err) {
		t.Fatalf("first apply after a reset: %v", err)
	}
	obj, _, err = s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "W a", "small"), applyOpts("applier", true))
	if err != nil {
		t.Fatalf("forced apply after a reset: %v", err)
	}
	if got := managers(obj); len(got) != 2 || got[0] != "applier/Apply" {
		t.Fatalf("managers after apply: %v", got)
	}
}
