package controller

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// op is what applying a child does.
type op int

const (
	opCreate op = iota + 1
	opUpdate
	opDelete
)

func (o op) String() string {
	switch o {
	case opCreate:
		return "create"
	case opUpdate:
		return "update"
	case opDelete:
		return "delete"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// action is one write that brings the children to their desired state.
type action struct {
	op   op
	kind Kind
	// obj is the object to create or the updated object (carrying the
	// observed resourceVersion), or the observed object to delete (whose
	// UID and resourceVersion are the delete's preconditions).
	obj *unstructured.Unstructured
	// want is the desired child (create and update), to apply again on a
	// fresher read.
	want *unstructured.Unstructured
}

// childID identifies a child among the children of one object.
type childID struct {
	gvk       schema.GroupKind
	namespace string
	name      string
}

func idOf(u *unstructured.Unstructured) childID {
	return childID{u.GroupVersionKind().GroupKind(), u.GetNamespace(), u.GetName()}
}

// planChildren returns the writes that turn observed, the children parent
// controls now, into desired, the complete set the plugin asked for. owns maps
// the owned kinds by group and kind. It does not modify its inputs. Desired
// children get parent's namespace (when parent is namespaced), a name when
// they have none (parent's name and the kind, then "-2", "-3" for further
// unnamed children of that kind, in the plugin's order) and a controller
// ownerReference to parent. A child that is up to date is not written.
func planChildren(parent *unstructured.Unstructured, parentNamespaced bool, owns map[schema.GroupKind]Kind,
	observed []*unstructured.Unstructured, desired []*unstructured.Unstructured) ([]action, error) {
	byID := make(map[childID]*unstructured.Unstructured, len(observed))
	for _, o := range observed {
		byID[idOf(o)] = o
	}
	seen := make(map[childID]bool, len(desired))
	unnamed := make(map[schema.GroupKind]int)
	ref := controllerRef(parent)
	var actions []action
	for i, d := range desired {
		if d == nil {
			return nil, fmt.Errorf("child %d: %w: null", i, ErrInvalidChild)
		}
		gvk := d.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return nil, fmt.Errorf("child %d: %w: apiVersion and kind are required", i, ErrInvalidChild)
		}
		kind, ok := owns[gvk.GroupKind()]
		if !ok {
			return nil, fmt.Errorf("child %d: %w: kind %s is not among the kinds this controller owns", i, ErrInvalidChild, gvk.GroupKind())
		}
		name := d.GetName()
		if name == "" {
			n := unnamed[gvk.GroupKind()] + 1
			unnamed[gvk.GroupKind()] = n
			name = parent.GetName() + "-" + strings.ToLower(gvk.Kind)
			if n > 1 {
				name += "-" + strconv.Itoa(n)
			}
		}
		ns := d.GetNamespace()
		switch {
		case !kind.Namespaced:
			if ns != "" {
				return nil, fmt.Errorf("child %s %q: %w: kind is cluster-scoped but a namespace is set", gvk.Kind, name, ErrInvalidChild)
			}
			if parentNamespaced {
				return nil, fmt.Errorf("child %s %q: %w: a namespaced object cannot own a cluster-scoped one", gvk.Kind, name, ErrInvalidChild)
			}
		case parentNamespaced:
			if ns != "" && ns != parent.GetNamespace() {
				return nil, fmt.Errorf("child %s %q: %w: namespace %q differs from the owner's %q", gvk.Kind, name, ErrInvalidChild, ns, parent.GetNamespace())
			}
			ns = parent.GetNamespace()
		default:
			if ns == "" {
				return nil, fmt.Errorf("child %s %q: %w: namespace is required for a namespaced child of a cluster-scoped object", gvk.Kind, name, ErrInvalidChild)
			}
		}
		id := childID{gvk.GroupKind(), ns, name}
		if seen[id] {
			return nil, fmt.Errorf("child %s %q: %w: named twice", gvk.Kind, name, ErrInvalidChild)
		}
		seen[id] = true
		cur, ok := byID[id]
		if ok && childUpToDate(cur, d, parent.GetUID()) {
			continue // the common case: no copy, no write
		}
		want := d.DeepCopy()
		want.SetAPIVersion(kind.Resource.GroupVersion().String())
		want.SetName(name)
		want.SetNamespace(ns)
		if !ok {
			actions = append(actions, action{op: opCreate, kind: kind, obj: forCreate(want, ref), want: want})
			continue
		}
		actions = append(actions, action{op: opUpdate, kind: kind, obj: mergeChild(cur, want, ref), want: want})
	}
	for _, o := range observed {
		if seen[idOf(o)] {
			continue
		}
		kind, ok := owns[o.GroupVersionKind().GroupKind()]
		if !ok {
			continue // not a kind this controller owns: leave it alone
		}
		actions = append(actions, action{op: opDelete, kind: kind, obj: o})
	}
	return actions, nil
}

// controllerRef is the controller ownerReference children of parent carry.
func controllerRef(parent *unstructured.Unstructured) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion:         parent.GetAPIVersion(),
		Kind:               parent.GetKind(),
		Name:               parent.GetName(),
		UID:                parent.GetUID(),
		Controller:         &t,
		BlockOwnerDeletion: &t,
	}
}

// controllerOf returns obj's controller ownerReference, if any. It reads the
// object's map directly: it runs for every cached change and every child.
func controllerOf(obj *unstructured.Unstructured) (metav1.OwnerReference, bool) {
	md, _ := obj.Object["metadata"].(map[string]any)
	refs, _ := md["ownerReferences"].([]any)
	for _, r := range refs {
		m, _ := r.(map[string]any)
		if c, _ := m["controller"].(bool); !c {
			continue
		}
		str := func(k string) string { v, _ := m[k].(string); return v }
		t := true
		return metav1.OwnerReference{APIVersion: str("apiVersion"), Kind: str("kind"), Name: str("name"),
			UID: types.UID(str("uid")), Controller: &t}, true
	}
	return metav1.OwnerReference{}, false
}

// serverSet are the metadata fields a child's desired state never sets.
var serverSet = []string{"uid", "resourceVersion", "generation", "creationTimestamp",
	"deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"}

// forCreate returns want ready to create: server-set fields and any status
// removed, the controller ownerReference set.
func forCreate(want *unstructured.Unstructured, ref metav1.OwnerReference) *unstructured.Unstructured {
	out := want.DeepCopy()
	for _, f := range serverSet {
		unstructured.RemoveNestedField(out.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(out.Object, "status")
	setControllerRef(out, ref)
	return out
}

// setControllerRef makes ref obj's only controller reference, keeping its
// other references.
func setControllerRef(obj *unstructured.Unstructured, ref metav1.OwnerReference) {
	refs := obj.GetOwnerReferences()
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, r := range refs {
		if r.UID == ref.UID || (r.Controller != nil && *r.Controller) {
			continue
		}
		out = append(out, r)
	}
	obj.SetOwnerReferences(append(out, ref))
}

// childUpToDate reports whether cur already holds everything want sets: each
// top-level field but metadata and status, the labels and annotations, and
// the controller reference to owner. Fields only cur has (server defaults,
// status, other metadata) are ignored.
func childUpToDate(cur, want *unstructured.Unstructured, owner types.UID) bool {
	ref, ok := controllerOf(cur)
	if !ok || ref.UID != owner {
		return false
	}
	for k, v := range want.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		if !objjson.Subset(v, cur.Object[k]) {
			return false
		}
	}
	wmd, _ := want.Object["metadata"].(map[string]any)
	cmd, _ := cur.Object["metadata"].(map[string]any)
	for _, f := range []string{"labels", "annotations"} {
		if w, ok := wmd[f]; ok && w != nil && !objjson.Subset(w, cmd[f]) {
			return false
		}
	}
	return true
}

// mergeChild returns cur with want's top-level fields, labels and
// annotations, and the controller reference; it keeps cur's
// resourceVersion so that the update is a compare-and-swap.
func mergeChild(cur, want *unstructured.Unstructured, ref metav1.OwnerReference) *unstructured.Unstructured {
	out := cur.DeepCopy()
	for k, v := range want.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		out.Object[k] = deepCopyJSON(v)
	}
	if l := want.GetLabels(); len(l) > 0 {
		out.SetLabels(mergeStrings(out.GetLabels(), l))
	}
	if a := want.GetAnnotations(); len(a) > 0 {
		out.SetAnnotations(mergeStrings(out.GetAnnotations(), a))
	}
	setControllerRef(out, ref)
	return out
}

func mergeStrings(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
