package controller

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var (
	cmKind   = Kind{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	nodeKind = Kind{Resource: schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "racks"}, Kind: "Rack"}
)

func obj(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }

func widget() *unstructured.Unstructured {
	return obj(map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "namespace": "ns", "uid": "u-w1", "generation": int64(2)},
		"spec":     map[string]any{"name": "one", "size": "small"},
	})
}

// ownedCM is a ConfigMap as the server returns it: controlled by w1, with
// server-set metadata and a field the plugin never sets.
func ownedCM(name string, data map[string]any) *unstructured.Unstructured {
	u := obj(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "ns", "uid": "u-" + name, "resourceVersion": "7",
			"creationTimestamp": "2026-01-01T00:00:00Z", "labels": map[string]any{"app": "w", "added-by-server": "x"}},
		"data":      data,
		"immutable": false,
	})
	setControllerRef(u, controllerRef(widget()))
	return u
}

func desiredCM(name string, data map[string]any) *unstructured.Unstructured {
	md := map[string]any{"labels": map[string]any{"app": "w"}}
	if name != "" {
		md["name"] = name
	}
	return obj(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data})
}

type plan struct {
	op   op
	name string
}

func TestPlanChildren(t *testing.T) {
	owns := map[schema.GroupKind]Kind{{Kind: "ConfigMap"}: cmKind}
	tests := []struct {
		name     string
		observed []*unstructured.Unstructured
		desired  []*unstructured.Unstructured
		want     []plan
		wantErr  error
	}{
		{name: "nothing observed, nothing desired"},
		{name: "a new child is created",
			desired: []*unstructured.Unstructured{desiredCM("w1-config", map[string]any{"size": "small"})},
			want:    []plan{{opCreate, "w1-config"}}},
		{name: "an unnamed child is named after its owner and kind",
			desired: []*unstructured.Unstructured{desiredCM("", nil), desiredCM("", nil)},
			want:    []plan{{opCreate, "w1-configmap"}, {opCreate, "w1-configmap-2"}}},
		{name: "an up-to-date child is not written, server-set fields ignored",
			observed: []*unstructured.Unstructured{ownedCM("c", map[string]any{"size": "small"})},
			desired:  []*unstructured.Unstructured{desiredCM("c", map[string]any{"size": "small"})}},
		{name: "a changed field updates the child",
			observed: []*unstructured.Unstructured{ownedCM("c", map[string]any{"size": "small"})},
			desired:  []*unstructured.Unstructured{desiredCM("c", map[string]any{"size": "large"})},
			want:     []plan{{opUpdate, "c"}}},
		{name: "a child without labels is up to date whatever labels the observed one has",
			observed: []*unstructured.Unstructured{ownedCM("c", map[string]any{"size": "small"})},
			desired: []*unstructured.Unstructured{obj(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "c"}, "data": map[string]any{"size": "small"}})}},
		{name: "a changed label updates the child",
			observed: []*unstructured.Unstructured{ownedCM("c", nil)},
			desired: []*unstructured.Unstructured{obj(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "c", "labels": map[string]any{"app": "other"}}, "data": nil})},
			want: []plan{{opUpdate, "c"}}},
		{name: "a child no longer desired is deleted",
			observed: []*unstructured.Unstructured{ownedCM("a", nil), ownedCM("b", nil)},
			desired:  []*unstructured.Unstructured{desiredCM("a", nil)},
			want:     []plan{{opDelete, "b"}}},
		{name: "scale from three to one",
			observed: []*unstructured.Unstructured{ownedCM("r-0", nil), ownedCM("r-1", nil), ownedCM("r-2", nil)},
			desired:  []*unstructured.Unstructured{desiredCM("r-0", nil)},
			want:     []plan{{opDelete, "r-1"}, {opDelete, "r-2"}}},
		{name: "a kind not owned is refused",
			desired: []*unstructured.Unstructured{obj(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}})},
			wantErr: ErrInvalidChild},
		{name: "a child without kind is refused",
			desired: []*unstructured.Unstructured{obj(map[string]any{"metadata": map[string]any{"name": "s"}})},
			wantErr: ErrInvalidChild},
		{name: "a child in another namespace is refused",
			desired: []*unstructured.Unstructured{obj(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "s", "namespace": "other"}})},
			wantErr: ErrInvalidChild},
		{name: "a child named twice is refused",
			desired: []*unstructured.Unstructured{desiredCM("c", nil), desiredCM("c", nil)},
			wantErr: ErrInvalidChild},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := widget()
			before := parent.DeepCopy()
			got, err := planChildren(parent, true, owns, tt.observed, tt.desired)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			var plans []plan
			for _, a := range got {
				plans = append(plans, plan{a.op, a.obj.GetName()})
				if a.op == opDelete {
					continue
				}
				if a.obj.GetNamespace() != "ns" {
					t.Errorf("%s %s: namespace %q, want ns", a.op, a.obj.GetName(), a.obj.GetNamespace())
				}
				ref, ok := controllerOf(a.obj)
				if !ok || ref.UID != "u-w1" || ref.Kind != "Widget" || ref.Name != "w1" {
					t.Errorf("%s %s: controller reference %+v", a.op, a.obj.GetName(), ref)
				}
				if a.op == opCreate && (a.obj.GetResourceVersion() != "" || a.obj.GetUID() != "") {
					t.Errorf("create %s carries server-set fields", a.obj.GetName())
				}
				if a.op == opUpdate && a.obj.GetResourceVersion() != "7" {
					t.Errorf("update %s: resourceVersion %q, want the observed 7", a.obj.GetName(), a.obj.GetResourceVersion())
				}
			}
			if diff := cmp.Diff(tt.want, plans, cmp.AllowUnexported(plan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before.Object, parent.Object); diff != "" {
				t.Errorf("parent modified:\n%s", diff)
			}
		})
	}
}

func TestPlanChildrenClusterScoped(t *testing.T) {
	owns := map[schema.GroupKind]Kind{{Kind: "ConfigMap"}: cmKind, {Group: "example.setpoint.dev", Kind: "Rack"}: nodeKind}
	rack := obj(map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Rack", "metadata": map[string]any{"name": "r", "uid": "u-r"}})
	tests := []struct {
		name     string
		parentNS bool
		desired  *unstructured.Unstructured
		wantErr  error
	}{
		{name: "cluster-scoped owner, namespaced child with a namespace",
			desired: obj(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "ns"}})},
		{name: "cluster-scoped owner, namespaced child without a namespace",
			desired: obj(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}), wantErr: ErrInvalidChild},
		{name: "cluster-scoped owner and child",
			desired: obj(map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Rack", "metadata": map[string]any{"name": "r2"}})},
		{name: "namespaced owner, cluster-scoped child", parentNS: true,
			desired: obj(map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Rack", "metadata": map[string]any{"name": "r2"}}), wantErr: ErrInvalidChild},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := planChildren(rack, tt.parentNS, owns, nil, []*unstructured.Unstructured{tt.desired})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestMergeChildKeepsServerFields(t *testing.T) {
	cur := ownedCM("c", map[string]any{"size": "small"})
	want := desiredCM("c", map[string]any{"size": "large"})
	got := mergeChild(cur, want, controllerRef(widget()))
	if got.GetResourceVersion() != "7" || got.GetUID() != "u-c" {
		t.Errorf("server fields lost: rv %q uid %q", got.GetResourceVersion(), got.GetUID())
	}
	if got.Object["immutable"] != false {
		t.Error("a field only the server set was dropped")
	}
	if d, _, _ := unstructured.NestedString(got.Object, "data", "size"); d != "large" {
		t.Errorf("data.size = %q, want large", d)
	}
	if l := got.GetLabels(); l["app"] != "w" || l["added-by-server"] != "x" {
		t.Errorf("labels = %v", l)
	}
	if !childUpToDate(got, want, types.UID("u-w1")) {
		t.Error("merged child is not up to date with what it was merged from")
	}
	if childUpToDate(got, want, types.UID("someone-else")) {
		t.Error("child up to date for an owner that does not control it")
	}
	if cur.Object["data"].(map[string]any)["size"] != "small" {
		t.Error("mergeChild modified its input")
	}
}
