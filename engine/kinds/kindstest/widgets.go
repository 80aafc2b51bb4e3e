package kindstest

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Widget returns the Widget name of examples/widget in the default
// namespace, with spec.size size and labels (none when nil).
func Widget(name, size string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       map[string]any{"name": "W " + name, "size": size},
	}}
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

// WidgetVariants are Widgets as stored or as sent in an update, valid and
// invalid in the ways update validation looks at.
func WidgetVariants() map[string]*unstructured.Unstructured {
	base := func() *unstructured.Unstructured {
		u := Widget("w", "small", map[string]string{"app": "x"})
		u.SetUID("u")
		u.SetCreationTimestamp(metav1.Now())
		u.SetGeneration(2)
		u.SetResourceVersion("7")
		u.Object["status"] = map[string]any{
			"state": "Ready", "capacity": int64(1), "lastProvisioned": "2026-11-21T07:00:00Z",
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Provisioned"}},
		}
		return u
	}
	vs := map[string]func(u *unstructured.Unstructured){
		"valid": func(*unstructured.Unstructured) {},
		"other status": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "Provisioning", "status", "state")
		},
		"no status":        func(u *unstructured.Unstructured) { delete(u.Object, "status") },
		"status not a map": func(u *unstructured.Unstructured) { u.Object["status"] = "x" },
		"capacity a string": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "one", "status", "capacity")
		},
		"bad date-time": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "yesterday", "status", "lastProvisioned")
		},
		"condition status not in the enum": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": "Maybe"}}, "status", "conditions")
		},
		"condition without status": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready"}}, "status", "conditions")
		},
		"conditions list map duplicate": func(u *unstructured.Unstructured) {
			c := map[string]any{"type": "Ready", "status": "True"}
			_ = unstructured.SetNestedSlice(u.Object, []any{c, runtime.DeepCopyJSONValue(c)}, "status", "conditions")
		},
		"size not in the enum": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "huge", "spec", "size")
		},
		"size missing": func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "size") },
		"CEL rule broken": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, strings.Repeat("n", 64), "spec", "name")
		},
		"other spec":    func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, "large", "spec", "size") },
		"bad label":     func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a b": "c"}) },
		"other label":   func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"app": "y"}) },
		"other name":    func(u *unstructured.Unstructured) { u.SetName("v") },
		"other uid":     func(u *unstructured.Unstructured) { u.SetUID("v") },
		"generation 1":  func(u *unstructured.Unstructured) { u.SetGeneration(1) },
		"no rv":         func(u *unstructured.Unstructured) { u.SetResourceVersion("") },
		"finalizer":     func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"example.setpoint.dev/f"}) },
		"bad finalizer": func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"a/b/c"}) },
		"deleting": func(u *unstructured.Unstructured) {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		},
		"owner reference without uid": func(u *unstructured.Unstructured) {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "K", Name: "n"}})
		},
		"metadata not an object": func(u *unstructured.Unstructured) { u.Object["metadata"] = "x" },
		"label not a string": func(u *unstructured.Unstructured) {
			u.Object["metadata"].(map[string]any)["labels"] = map[string]any{"a": int64(1)}
		},
		"wrong kind": func(u *unstructured.Unstructured) { u.SetKind("Gadget") },
		"wrong apiVersion and CEL rule broken": func(u *unstructured.Unstructured) {
			u.SetAPIVersion("example.setpoint.dev/v9")
			_ = unstructured.SetNestedField(u.Object, strings.Repeat("n", 64), "spec", "name")
		},
	}
	out := map[string]*unstructured.Unstructured{}
	for name, change := range vs {
		u := base()
		change(u)
		out[name] = u
	}
	return out
}
