package controller

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// checkControllerOf fails unless controllerOf finds the controller
// reference metav1.GetControllerOf finds, as the fields the controller
// reads (apiVersion, kind, name, uid).
func checkControllerOf(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	got, ok := controllerOf(obj)
	want := metav1.GetControllerOf(obj)
	if ok != (want != nil) {
		t.Fatalf("%v: controllerOf found one: %v, metav1.GetControllerOf %v", obj.Object["metadata"], ok, want)
	}
	if !ok {
		return
	}
	w := metav1.OwnerReference{APIVersion: want.APIVersion, Kind: want.Kind, Name: want.Name, UID: want.UID, Controller: want.Controller}
	if diff := cmp.Diff(w, got); diff != "" {
		t.Fatalf("%v: (-metav1.GetControllerOf +controllerOf):\n%s", obj.Object["metadata"], diff)
	}
}

func ownerRef(kind, name, uid string, controller any) map[string]any {
	r := map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": kind, "name": name, "uid": uid}
	if controller != nil {
		r["controller"] = controller
	}
	if name == "blocking" {
		r["blockOwnerDeletion"] = true
	}
	return r
}

func withRefs(refs ...any) *unstructured.Unstructured {
	md := map[string]any{"name": "child"}
	if refs != nil {
		md["ownerReferences"] = refs
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Gizmo", "metadata": md}}
}

// TestControllerOfIsGetControllerOf: controllerOf, which reads the
// references without converting them, finds what metav1.GetControllerOf
// finds on the owner references the server stores.
func TestControllerOfIsGetControllerOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
	}{
		{"no references", withRefs()},
		{"empty list", withRefs([]any{}...)},
		{"one controller", withRefs(ownerRef("Widget", "w", "u1", true))},
		{"owner, not controller", withRefs(ownerRef("Widget", "w", "u1", false))},
		{"owner without the field", withRefs(ownerRef("Widget", "w", "u1", nil))},
		{"controller second", withRefs(ownerRef("Widget", "a", "u1", nil), ownerRef("Gizmo", "blocking", "u2", true))},
		{"two controllers: the first", withRefs(ownerRef("Widget", "a", "u1", true), ownerRef("Gizmo", "b", "u2", true))},
	} {
		t.Run(tc.name, func(t *testing.T) { checkControllerOf(t, tc.obj) })
	}
	r := rand.New(rand.NewPCG(13, 14))
	for range 2000 {
		refs := make([]any, r.IntN(4))
		for i := range refs {
			refs[i] = ownerRef([]string{"Widget", "Gizmo"}[r.IntN(2)], []string{"a", "b", "blocking"}[r.IntN(3)],
				fmt.Sprint("u", r.IntN(3)), []any{nil, true, false}[r.IntN(3)])
		}
		checkControllerOf(t, withRefs(refs...))
	}
}

// TestDeepCopyJSONIsDeepCopyJSONValue: deepCopyJSON copies a JSON value as
// runtime.DeepCopyJSONValue does, sharing no map or slice with it (it also
// copies scalars of other types, where DeepCopyJSONValue panics).
func TestDeepCopyJSONIsDeepCopyJSONValue(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for range 2000 {
		v := randomJSON(r, 0)
		got := deepCopyJSON(v)
		if diff := cmp.Diff(runtime.DeepCopyJSONValue(v), got); diff != "" {
			t.Fatalf("(-DeepCopyJSONValue +deepCopyJSON):\n%s", diff)
		}
		if shares(v, got) {
			t.Fatalf("deepCopyJSON(%#v) shares a map or slice with it", v)
		}
	}
}

// shares tells whether b holds a map or non-empty slice of a.
func shares(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y := b.(map[string]any)
		if len(x) > 0 && fmt.Sprintf("%p", x) == fmt.Sprintf("%p", y) {
			return true
		}
		for k := range x {
			if shares(x[k], y[k]) {
				return true
			}
		}
	case []any:
		y := b.([]any)
		if len(x) > 0 && &x[0] == &y[0] {
			return true
		}
		for i := range x {
			if shares(x[i], y[i]) {
				return true
			}
		}
	}
	return false
}

func randomJSON(r *rand.Rand, depth int) any {
	n := 7
	if depth > 3 {
		n = 5
	}
	switch r.IntN(n) {
	case 0:
		return fmt.Sprint("s", r.IntN(3))
	case 1:
		return r.Int64()
	case 2:
		return r.NormFloat64()
	case 3:
		return []any{true, false, nil}[r.IntN(3)]
	case 4:
		return []any{map[string]any{}, []any{}}[r.IntN(2)]
	case 5:
		m := map[string]any{}
		for range r.IntN(4) {
			m[fmt.Sprint("k", r.IntN(5))] = randomJSON(r, depth+1)
		}
		return m
	default:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randomJSON(r, depth+1)
		}
		return l
	}
}
