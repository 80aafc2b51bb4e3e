package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func configMap(generation int64, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "default", "uid": "u-1", "resourceVersion": "5"},
	}}
	if generation != 0 {
		u.SetGeneration(generation)
	}
	if data != nil {
		u.Object["data"] = data
	}
	return u
}

func widgetAt(generation int64, size string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default", "uid": "u-2", "generation": generation},
		"spec":     map[string]any{"size": size},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// TestChangeMatters: a change matters when the object asks for something
// else, by its generation where the kind counts one (custom resources) and
// by its content where it does not (ConfigMaps have none, or one frozen at
// what their creator sent), or when its labels, annotations, finalizers,
// deletion or uid change. Status and the server's metadata alone do not.
func TestChangeMatters(t *testing.T) {
	withRV := func(u *unstructured.Unstructured, rv string) *unstructured.Unstructured {
		u.SetResourceVersion(rv)
		return u
	}
	withLabels := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetLabels(map[string]string{"a": "b"})
		return u
	}
	tests := []struct {
		name     string
		old, cur *unstructured.Unstructured
		want     bool
	}{
		{"created", nil, configMap(0, nil), true},
		{"deleted", configMap(0, nil), nil, true},
		{"configmap data changed, no generation", configMap(0, map[string]any{"a": "b"}), configMap(0, map[string]any{"a": "c"}), true},
		{"configmap data added", configMap(0, nil), configMap(0, map[string]any{"a": "b"}), true},
		{"configmap data removed", configMap(0, map[string]any{"a": "b"}), configMap(0, nil), true},
		{"configmap data changed, frozen generation", configMap(5, map[string]any{"a": "b"}), configMap(5, map[string]any{"a": "c"}), true},
		{"configmap new field", configMap(0, nil), func() *unstructured.Unstructured {
			u := configMap(0, nil)
			u.Object["immutable"] = true
			return u
		}(), true},
		{"configmap resourceVersion only", configMap(0, map[string]any{"a": "b"}), withRV(configMap(0, map[string]any{"a": "b"}), "6"), false},
		{"configmap null field and missing one", configMap(0, nil), func() *unstructured.Unstructured {
			u := configMap(0, nil)
			u.Object["binaryData"] = nil
			return u
		}(), false},
		{"configmap labels", configMap(0, nil), withLabels(configMap(0, nil)), true},
		{"widget generation", widgetAt(1, "small", nil), widgetAt(2, "large", nil), true},
		{"widget status only", widgetAt(1, "small", nil), widgetAt(1, "small", map[string]any{"state": "Ready"}), false},
		{"widget status changed", widgetAt(1, "small", map[string]any{"state": "A"}), widgetAt(1, "small", map[string]any{"state": "B"}), false},
		{"widget same", widgetAt(3, "small", nil), widgetAt(3, "small", nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := changeMatters(tt.old, tt.cur); got != tt.want {
				t.Errorf("changeMatters = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTerminalSeen: a terminal failure is remembered at what the object
// asked for, so that a change of its content lets a kind without a
// generation be reconciled again, as a new generation does for the others.
func TestTerminalSeen(t *testing.T) {
	k := Key{"default", "c"}
	ts := newTerminalSeen()
	failed := configMap(5, map[string]any{"a": "b"})
	if ts.seen(k, failed) {
		t.Fatal("seen before it was marked")
	}
	ts.mark(k, failed)
	labelled := failed.DeepCopy()
	labelled.SetLabels(map[string]string{"x": "y"})
	labelled.SetResourceVersion("9")
	if !ts.seen(k, labelled) {
		t.Error("a change of metadata only: not seen")
	}
	if ts.seen(k, configMap(5, map[string]any{"a": "c"})) {
		t.Error("its data changed, its generation as sent: still seen")
	}
	ts.mark(Key{"default", "w"}, widgetAt(2, "large", nil))
	if !ts.seen(Key{"default", "w"}, widgetAt(2, "large", map[string]any{"state": "Failed"})) {
		t.Error("a widget whose status only changed: not seen")
	}
	if ts.seen(Key{"default", "w"}, widgetAt(3, "large", nil)) {
		t.Error("a widget at a new generation: still seen")
	}
	ts.forget(k)
	if ts.seen(k, failed) {
		t.Error("seen after forget")
	}
}
