package kinds

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func scalePath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

// ScaleOf renders the autoscaling/v1 Scale of obj.
func (k *Kind) ScaleOf(obj *unstructured.Unstructured) *unstructured.Unstructured {
	spec, _, _ := unstructured.NestedInt64(obj.Object, scalePath(k.scale.SpecReplicasPath)...)
	status, _, _ := unstructured.NestedInt64(obj.Object, scalePath(k.scale.StatusReplicasPath)...)
	sel := ""
	if k.scale.LabelSelectorPath != nil {
		sel, _, _ = unstructured.NestedString(obj.Object, scalePath(*k.scale.LabelSelectorPath)...)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling/v1",
		"kind":       "Scale",
		"metadata": map[string]any{
			"name": obj.GetName(), "namespace": obj.GetNamespace(), "uid": string(obj.GetUID()),
			"resourceVersion": obj.GetResourceVersion(), "creationTimestamp": obj.GetCreationTimestamp().UTC().Format("2006-01-02T15:04:05Z"),
		},
		"spec":   map[string]any{"replicas": spec},
		"status": map[string]any{"replicas": status},
	}}
	if sel != "" {
		_ = unstructured.SetNestedField(u.Object, sel, "status", "selector")
	}
	if obj.GetNamespace() == "" {
		unstructured.RemoveNestedField(u.Object, "metadata", "namespace")
	}
	return u
}

// ServesScale reports whether the kind serves the scale subresource.
func (k *Kind) ServesScale() bool { return k.Scale && k.scale != nil }

// SetScaleReplicas sets the replicas of obj, an object of a kind that
// serves the scale subresource, as a write through it does.
func (k *Kind) SetScaleReplicas(obj *unstructured.Unstructured, replicas int64) error {
	return unstructured.SetNestedField(obj.Object, replicas, scalePath(k.scale.SpecReplicasPath)...)
}
