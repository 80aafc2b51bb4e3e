package engine

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/warning"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// gadgetCRD is cluster-scoped, served at two versions with conversion None,
// and declares the status and scale subresources.
var gadgetCRD = testsupport.CRD{Group: "test.setpoint.dev", Kind: "Gadget", Scope: "Cluster", ShortNames: []string{"gd"},
	Status: true, Scale: `{specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}`,
	Schema: `
type: object
properties:
  spec:
    type: object
    properties:
      replicas: {type: integer, minimum: 0}
      extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
  status:
    type: object
    properties:
      replicas: {type: integer}
      selector: {type: string}`,
	Versions: []testsupport.Version{{Name: "v1beta1"}, {Name: "v1", Storage: true}}}

var (
	gadgetsV1      = schema.GroupVersionResource{Group: "test.setpoint.dev", Version: "v1", Resource: "gadgets"}
	gadgetsV1beta1 = schema.GroupVersionResource{Group: "test.setpoint.dev", Version: "v1beta1", Resource: "gadgets"}
)

func TestClusterScopedVersionsAndScale(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	if _, err := s.Create(ctx, kinds.CRDResource, gadgetCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g := kindstest.FromYAML(t, "apiVersion: test.setpoint.dev/v1beta1\nkind: Gadget\nmetadata: {name: g1}\nspec:\n  replicas: 2\n  extra: {anything: [1, 2]}\n")
	if _, err := s.Create(ctx, gadgetsV1beta1, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The other served version reads the same object, with its apiVersion.
	got, err := s.Get(ctx, gadgetsV1, "", "g1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetAPIVersion() != "test.setpoint.dev/v1" || got.GetNamespace() != "" {
		t.Errorf("read at v1: apiVersion %s namespace %q", got.GetAPIVersion(), got.GetNamespace())
	}
	if _, found, _ := unstructured.NestedSlice(got.Object, "spec", "extra", "anything"); !found {
		t.Error("x-kubernetes-preserve-unknown-fields content was pruned")
	}
	// A namespace on a cluster-scoped resource is not found.
	if _, err := s.Get(ctx, gadgetsV1, "default", "g1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespaced get of a cluster-scoped kind = %v", err)
	}

	sc, err := s.GetScale(ctx, gadgetsV1, "", "g1")
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(sc.Object, "spec", "replicas"); r != 2 || sc.GetKind() != "Scale" {
		t.Fatalf("scale = %v", sc.Object)
	}
	if _, err := s.Patch(ctx, gadgetsV1, "", "g1", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Get(ctx, gadgetsV1, "", "g1", metav1.GetOptions{})
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 5 || got.GetGeneration() != 2 {
		t.Errorf("after scaling: replicas %d generation %d", r, got.GetGeneration())
	}
	if _, err := s.Patch(ctx, gadgetsV1, "", "g1", types.MergePatchType, []byte(`{"spec":{"replicas":-1}}`), metav1.PatchOptions{}, "scale"); !apierrors.IsInvalid(err) {
		t.Errorf("negative replicas = %v, want Invalid", err)
	}
	if _, err := s.GetScale(ctx, widgets, "default", "x"); !apierrors.IsNotFound(err) {
		t.Errorf("scale of a kind without it = %v", err)
	}
}

// recordingAdmitter mutates and validates, recording the order of calls.
type recordingAdmitter struct {
	calls []string
}

func (a *recordingAdmitter) Mutate(_ context.Context, req *AdmissionRequest, changing func()) error {
	a.calls = append(a.calls, "mutate "+string(req.Operation))
	if req.Object != nil {
		changing()
		labels := req.Object.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["mutated"] = "yes"
		req.Object.SetLabels(labels)
	}
	return nil
}

func (a *recordingAdmitter) Validate(_ context.Context, req *AdmissionRequest) error {
	a.calls = append(a.calls, "validate "+string(req.Operation))
	if req.Object != nil && req.Object.GetName() == "denied" {
		return errors.New("names like that are not allowed")
	}
	if req.Operation == OpDelete && req.OldObject.GetName() == "kept" {
		return apierrors.NewConflict(req.Resource.GroupResource(), "kept", errors.New("kept on purpose"))
	}
	return nil
}

func TestAdmission(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	a := &recordingAdmitter{}
	s.setAdmitter(a)
	out := mustCreate(t, s, widget("kept", "small", nil))
	if out.GetLabels()["mutated"] != "yes" {
		t.Errorf("mutation lost: labels %v", out.GetLabels())
	}
	if _, err := s.Create(ctx, widgets, widget("denied", "small", nil), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("denied create = %v, want Forbidden", err)
	}
	// Schema validation runs between mutation and validation: an invalid
	// object never reaches Validate.
	a.calls = nil
	if _, err := s.Create(ctx, widgets, widget("bad", "huge", nil), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("invalid create = %v", err)
	}
	if len(a.calls) != 1 || a.calls[0] != "mutate CREATE" {
		t.Errorf("calls for an invalid object = %v, want only the mutation", a.calls)
	}
	if err := s.Delete(ctx, widgets, "default", "kept", metav1.DeleteOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("denied delete = %v, want the admitter's Conflict", err)
	}
	s.setAdmitter(nil)
	if err := s.Delete(ctx, widgets, "default", "kept", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete without admission: %v", err)
	}
}

// warnings collects what the engine reports through the warning recorder.
type warnings []string

func (w *warnings) AddWarning(_, text string) { *w = append(*w, text) }

func TestFieldValidationWarn(t *testing.T) {
	s := newService(t)
	var got warnings
	ctx := warning.WithWarningRecorder(context.Background(), &got)
	u := widget("w", "small", nil)
	_ = unstructured.SetNestedField(u.Object, "x", "spec", "bogus")
	if _, err := s.Create(ctx, widgets, u, metav1.CreateOptions{FieldValidation: "Warn"}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != `unknown field "spec.bogus"` {
		t.Errorf("warnings = %q", got)
	}
}

func TestBuiltinUnknownFields(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	ns := kindstest.FromYAML(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: strict}\nbogus: 1\n")
	if _, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{FieldValidation: "Strict"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("strict create with an unknown field = %v, want BadRequest", err)
	}
	out, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Object["bogus"]; ok {
		t.Error("the unknown field was stored")
	}
}

func TestAdmitterFuncsDryRun(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	var sawDryRun bool
	s.setAdmitter(AdmitterFuncs{ValidateFunc: func(_ context.Context, req *AdmissionRequest) error {
		sawDryRun = req.DryRun
		return nil
	}})
	if _, err := s.Create(ctx, widgets, widget("d", "small", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if !sawDryRun {
		t.Error("admission did not see dryRun")
	}
}
