package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

func crdCondition(t *testing.T, s *Service, name, typ string) string {
	t.Helper()
	crd, err := s.Get(context.Background(), kinds.CRDResource, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == typ {
			return m["status"].(string)
		}
	}
	return ""
}

func TestCRDUpdateAndConflicts(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	// Widen the enum and add a served version: both take effect at once.
	crd, err := s.Get(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	v1 := versions[0].(map[string]any)
	enum := []any{"small", "medium", "large", "huge"}
	if err := unstructured.SetNestedSlice(v1, enum, "schema", "openAPIV3Schema", "properties", "spec", "properties", "size", "enum"); err != nil {
		t.Fatal(err)
	}
	v2 := unstructured.Unstructured{Object: v1}
	v2c := v2.DeepCopy().Object
	v2c["name"], v2c["storage"] = "v2", false
	_ = unstructured.SetNestedSlice(crd.Object, []any{v1, v2c}, "spec", "versions")
	if _, err := s.Update(ctx, kinds.CRDResource, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, widgets, widget("big", "huge", nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create with the widened enum: %v", err)
	}
	v2gvr := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v2", Resource: "widgets"}
	if got, err := s.Get(ctx, v2gvr, "default", "big", metav1.GetOptions{}); err != nil || got.GetAPIVersion() != "example.setpoint.dev/v2" {
		t.Fatalf("read at the new version: %v, %v", got, err)
	}

	// A second CRD of the group that claims the same kind is not served.
	clash := fromYAML(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: otherwidgets.example.setpoint.dev}
spec:
  group: example.setpoint.dev
  scope: Namespaced
  names: {plural: otherwidgets, singular: otherwidget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object}}
`)
	if _, err := s.Create(ctx, kinds.CRDResource, clash, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := crdCondition(t, s, "otherwidgets.example.setpoint.dev", "NamesAccepted"); got != "False" {
		t.Errorf("NamesAccepted of the clashing CRD = %q, want False", got)
	}
	if _, ok := s.Resource(schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "otherwidgets"}); ok {
		t.Error("the clashing CRD is served")
	}
	// An invalid CRD is rejected with the apiextensions validation.
	bad := fromYAML(t, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: wrong.example.setpoint.dev}\nspec:\n  group: example.setpoint.dev\n  scope: Namespaced\n  names: {plural: things, kind: Thing}\n  versions: []\n")
	if _, err := s.Create(ctx, kinds.CRDResource, bad, metav1.CreateOptions{}); err == nil {
		t.Error("an invalid CRD was accepted")
	}
}

func TestCRDDryRunDeleteKeepsServing(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	mustCreate(t, s, widget("stays", "small", nil))
	if err := s.Delete(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Resource(widgets); !ok {
		t.Fatal("a dry-run delete of the CRD stopped serving it")
	}
	if _, err := s.Get(ctx, widgets, "default", "stays", metav1.GetOptions{}); err != nil {
		t.Fatalf("a dry-run delete of the CRD removed its objects: %v", err)
	}
}

// settle runs garbage collection sweeps until one changes nothing.
func settle(t *testing.T, s *Service) {
	t.Helper()
	for range 50 {
		changed, err := s.sweep(context.Background())
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		if !changed {
			return
		}
	}
	t.Fatal("sweeps did not settle")
}

func crdConditionOf(t *testing.T, s *Service, name, typ string) (status, reason string) {
	t.Helper()
	crd, err := s.Get(context.Background(), kinds.CRDResource, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == typ {
			return m["status"].(string), m["reason"].(string)
		}
	}
	return "", ""
}

func TestCRDDeletionWaitsForObjectFinalizers(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	const name = "widgets.example.setpoint.dev"
	mustCreate(t, s, widget("plain", "small", nil))
	held := widget("held", "small", nil)
	held.SetFinalizers([]string{"example.setpoint.dev/hold"})
	mustCreate(t, s, held)

	if err := s.Delete(ctx, kinds.CRDResource, "", name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	crd, err := s.Get(ctx, kinds.CRDResource, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CRD gone at once: %v", err)
	}
	if crd.GetDeletionTimestamp() == nil || !slices.Contains(crd.GetFinalizers(), apiextensionsv1.CustomResourceCleanupFinalizer) {
		t.Fatalf("deleted CRD: deletionTimestamp %v, finalizers %v; want both", crd.GetDeletionTimestamp(), crd.GetFinalizers())
	}
	if st, reason := crdConditionOf(t, s, name, "Terminating"); st != "True" || reason != "InstanceDeletionPending" {
		t.Errorf("Terminating = %s (%s), want True (InstanceDeletionPending)", st, reason)
	}
	// Terminating: served for reads, creates refused.
	if _, ok := s.Resource(widgets); !ok {
		t.Fatal("a terminating CRD's kind is no longer served")
	}
	if _, err := s.Get(ctx, widgets, "default", "plain", metav1.GetOptions{}); err != nil {
		t.Errorf("get while terminating: %v", err)
	}
	_, err = s.Create(ctx, widgets, widget("late", "small", nil), metav1.CreateOptions{})
	if !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), "terminating") {
		t.Errorf("create while terminating: %v, want MethodNotAllowed", err)
	}

	// The sweep deletes every object; the one with a finalizer waits, and
	// so does the CRD.
	settle(t, s)
	if _, err := s.Get(ctx, widgets, "default", "plain", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("object without finalizers after the cleanup: %v, want NotFound", err)
	}
	h, err := s.Get(ctx, widgets, "default", "held", metav1.GetOptions{})
	if err != nil || h.GetDeletionTimestamp() == nil {
		t.Fatalf("object with a finalizer: %v, %v; want it deleting, still there", h, err)
	}
	if st, reason := crdConditionOf(t, s, name, "Terminating"); st != "True" || reason != "InstanceDeletionInProgress" {
		t.Errorf("Terminating = %s (%s), want True (InstanceDeletionInProgress)", st, reason)
	}
	if _, ok := s.Resource(widgets); !ok {
		t.Fatal("kind no longer served while an object waits for its finalizer")
	}

	// Removing the finalizer (an update, allowed while terminating) lets
	// the object go, and then the CRD.
	h.SetFinalizers(nil)
	if _, err := s.Update(ctx, widgets, h, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("remove the finalizer while terminating: %v", err)
	}
	settle(t, s)
	if _, err := s.Get(ctx, kinds.CRDResource, "", name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("CRD after its last object went: %v, want NotFound", err)
	}
	if _, ok := s.Resource(widgets); ok {
		t.Fatal("kind still served after the CRD went")
	}
}

func TestCRDDeletionSeenByAnotherServer(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	other, err := New(ctx, Options{Store: s.store, GCInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = other.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	// A widget with a finalizer keeps the kind terminating until the test
	// lets it go; without one the other server's collector may finish the
	// deletion before the first create below is tried.
	held := widget("held", "small", nil)
	held.SetFinalizers([]string{"example.setpoint.dev/hold"})
	if _, err := s.Create(ctx, widgets, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The other server follows the CRD: it keeps serving the kind and
	// refuses creates.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := other.Create(ctx, widgets, widget(fmt.Sprintf("w%d", time.Now().UnixNano()), "small", nil), metav1.CreateOptions{})
		if apierrors.IsMethodNotSupported(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other server still accepts creates: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := other.Resource(widgets); !ok {
		t.Fatal("the other server stopped serving the terminating kind")
	}
	// Its garbage collector completes the deletion once the last object
	// lets go. The collector marks the object deleting concurrently, so
	// the update is retried from fresh state on a conflict, as a client
	// would.
	for {
		cur, err := s.Get(ctx, widgets, "default", "held", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.SetFinalizers(nil)
		_, err = s.Update(ctx, widgets, cur, metav1.UpdateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || time.Now().After(deadline) {
			t.Fatalf("remove the finalizer: %v", err)
		}
	}
	for {
		if _, ok := other.Resource(widgets); !ok {
			if _, err := s.Get(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the CRD was not removed by the other server's garbage collector")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
