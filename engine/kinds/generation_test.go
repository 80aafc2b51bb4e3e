package kinds

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// leaseCRD is a CustomResourceDefinition of coordination.k8s.io/v1 Leases,
// as the server's own (engine/election) defines them.
const leaseCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: leases.coordination.k8s.io}
spec:
  group: coordination.k8s.io
  scope: Namespaced
  names: {plural: leases, singular: lease, kind: Lease, listKind: LeaseList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              holderIdentity: {type: string}
`

// specChanges change, for each kind, a field other than metadata and
// status that its strategy keeps.
var specChanges = map[string]string{
	"Namespace":                "spec: {finalizers: [kubernetes, example.com/x]}",
	"Event":                    "message: changed",
	"CustomResourceDefinition": "spec: {group: example.com}",
	"ServiceAccount":           "automountServiceAccountToken: false",
	"Secret":                   "data: {a: Yw==}",
	"ConfigMap":                "data: {a: c}",
	"Role":                     "rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]",
	"ClusterRole":              "rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]",
	"RoleBinding":              "subjects: [{kind: User, name: someone}]",
	"ClusterRoleBinding":       "subjects: [{kind: User, name: someone}]",
	"Lease":                    "spec: {holderIdentity: b}",
	"Widget":                   "spec: {name: changed, size: large}",
}

// TestGenerationAsKubernetes: metadata.generation as kube-apiserver's
// strategies set it. CustomResourceDefinitions and custom resources count
// changes other than of metadata (1 on create, whatever was sent; one more
// per update that changes anything else); every other built-in kind, and
// Leases served by a CRD, keep what their creator sent (nothing, or a
// number) and never change it.
func TestGenerationAsKubernetes(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	serveCRD(t, r, kindstest.FromYAML(t, leaseCRD))
	counts := map[string]bool{"CustomResourceDefinition": true, "Widget": true}
	// By kind: core/v1 and events.k8s.io/v1 Events are both Events.
	tested := map[string]bool{}
	for _, res := range r.Resources() {
		k, _ := r.Get(res.GVR)
		if !k.Builtin && k.Kind != "Lease" && k.Kind != "Widget" {
			continue
		}
		change, ok := specChanges[k.Kind]
		if !ok {
			t.Errorf("%s: no change to test its generation with", k.Kind)
			continue
		}
		tested[k.Kind] = true
		t.Run(k.GVR.Group+"/"+k.Kind, func(t *testing.T) {
			for _, sent := range []int64{0, 5} {
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": k.GVR.GroupVersion().String(), "kind": k.Kind,
					"metadata": map[string]any{"name": "g"},
				}}
				if k.Namespaced {
					obj.SetNamespace("default")
				}
				if sent != 0 {
					obj.SetGeneration(sent)
				}
				k.PrepareForCreate(ctx, obj)
				want := sent
				if counts[k.Kind] {
					want = 1
				}
				if got := obj.GetGeneration(); got != want {
					t.Errorf("created with generation %d: %d, want %d", sent, got, want)
				}
				if _, has := obj.Object["metadata"].(map[string]any)["generation"]; has != (want != 0) {
					t.Errorf("created with generation %d: metadata %v", sent, obj.Object["metadata"])
				}

				// An update, as the write pipeline hands it to the
				// strategy: generation as stored.
				old := obj
				upd := old.DeepCopy()
				for f, v := range kindstest.FromYAML(t, change).Object {
					upd.Object[f] = v
				}
				k.PrepareForUpdate(ctx, "", upd, old.DeepCopy())
				if counts[k.Kind] {
					want++
				}
				if got := obj.GetGeneration(); want == 0 && got != 0 {
					t.Fatalf("the old object changed: generation %d", got)
				}
				if got := upd.GetGeneration(); got != want {
					t.Errorf("updated (%s) from generation %d: %d, want %d", change, old.GetGeneration(), got, want)
				}

				// Labels alone never count.
				lbl := upd.DeepCopy()
				lbl.SetLabels(map[string]string{"a": "b"})
				k.PrepareForUpdate(ctx, "", lbl, upd.DeepCopy())
				if got := lbl.GetGeneration(); got != want {
					t.Errorf("labels changed at generation %d: %d", want, got)
				}
			}
		})
	}
	if len(tested) != len(specChanges) {
		t.Errorf("tested %d kinds, want %d (every built-in kind, Leases and Widgets)", len(tested), len(specChanges))
	}
}
