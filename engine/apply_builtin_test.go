package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// fieldsOf returns the managedFields of obj as "manager/operation" -> the
// fields it owns, decoded from FieldsV1.
func fieldsOf(t *testing.T, obj *unstructured.Unstructured) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, e := range obj.GetManagedFields() {
		var f any
		if e.FieldsV1 != nil {
			if err := json.Unmarshal(e.FieldsV1.Raw, &f); err != nil {
				t.Fatalf("fieldsV1 of %s: %v", e.Manager, err)
			}
		}
		out[e.Manager+"/"+string(e.Operation)] = f
	}
	return out
}

// TestApplyBuiltinManagedFields checks the managedFields server-side apply
// records on built-in kinds against those kube-apiserver v1.34 records for
// the same requests (taken from one, side by side with kubectl): a map's
// members without the map itself, lists as their API type merges them
// (keyed by name, or atomic), and nothing left to a manager that a forced
// apply took every member of a map from.
func TestApplyBuiltinManagedFields(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	type step struct {
		manager string
		force   bool
		body    string
	}
	for _, tc := range []struct {
		name  string
		gvr   schema.GroupVersionResource
		steps []step
		want  string // manager/operation -> fieldsV1, as JSON
	}{{
		name: "configmap",
		gvr:  kinds.ConfigMapResource,
		steps: []step{{manager: "kubectl", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1",
			"labels":{"app":"a","tier":"t"},"annotations":{"note":"n"}},"data":{"k1":"v1","k2":"v2"}}`}},
		want: `{"kubectl/Apply":{"f:data":{"f:k1":{},"f:k2":{}},
			"f:metadata":{"f:annotations":{"f:note":{}},"f:labels":{"f:app":{},"f:tier":{}}}}}`,
	}, {
		name: "configmap forced by a second manager",
		gvr:  kinds.ConfigMapResource,
		steps: []step{
			{manager: "kubectl", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm2",
				"labels":{"app":"a"}},"data":{"k1":"v1","k2":"v2"}}`},
			{manager: "second", force: true, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm2"},
				"data":{"k1":"other"}}`},
		},
		want: `{"kubectl/Apply":{"f:data":{"f:k2":{}},"f:metadata":{"f:labels":{"f:app":{}}}},
			"second/Apply":{"f:data":{"f:k1":{}}}}`,
	}, {
		name: "configmap whose data a second manager takes whole",
		gvr:  kinds.ConfigMapResource,
		steps: []step{
			{manager: "kubectl", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm3",
				"labels":{"app":"a"}},"data":{"k1":"v1"}}`},
			{manager: "second", force: true, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm3"},
				"data":{"k1":"other"}}`},
		},
		want: `{"kubectl/Apply":{"f:metadata":{"f:labels":{"f:app":{}}}},"second/Apply":{"f:data":{"f:k1":{}}}}`,
	}, {
		name: "secret",
		gvr:  kinds.SecretResource,
		steps: []step{{manager: "kubectl", body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1",
			"labels":{"app":"a"}},"type":"Opaque","stringData":{"u":"me"},"data":{"p":"cHc="}}`}},
		want: `{"kubectl/Apply":{"f:data":{"f:p":{}},"f:metadata":{"f:labels":{"f:app":{}}},
			"f:stringData":{"f:u":{}},"f:type":{}}}`,
	}, {
		name: "serviceaccount",
		gvr:  kinds.ServiceAccountResource,
		steps: []step{{manager: "kubectl", body: `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"sa1"},
			"secrets":[{"name":"s1"},{"name":"s2"}],"imagePullSecrets":[{"name":"r1"}],"automountServiceAccountToken":false}`}},
		want: `{"kubectl/Apply":{"f:automountServiceAccountToken":{},"f:imagePullSecrets":{},
			"f:secrets":{"k:{\"name\":\"s1\"}":{},"k:{\"name\":\"s2\"}":{}}}}`,
	}, {
		name: "rolebinding",
		gvr:  kinds.RoleBindingResource,
		steps: []step{{manager: "kubectl", body: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",
			"metadata":{"name":"rb1"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cr1"},
			"subjects":[{"kind":"User","name":"bob","apiGroup":"rbac.authorization.k8s.io"}]}`}},
		want: `{"kubectl/Apply":{"f:roleRef":{},"f:subjects":{}}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var obj *unstructured.Unstructured
			for _, st := range tc.steps {
				var u unstructured.Unstructured
				if err := json.Unmarshal([]byte(st.body), &u.Object); err != nil {
					t.Fatal(err)
				}
				var err error
				obj, _, err = s.Apply(ctx, tc.gvr, "default", u.GetName(), []byte(st.body), applyOpts(st.manager, st.force))
				if err != nil {
					t.Fatalf("apply as %s: %v", st.manager, err)
				}
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, fieldsOf(t, obj)); diff != "" {
				t.Fatalf("managedFields (-kube-apiserver +setpoint):\n%s", diff)
			}
		})
	}
}

// TestApplyBuiltinUndeclaredFields: an applied configuration with a field
// the kind's API type does not declare is refused as kube-apiserver refuses
// it; a stored object that holds one below the top level (written before
// writes pruned them there) is still applied to, and its updates recorded,
// and an update drops it as kube-apiserver's decoder would.
func TestApplyBuiltinUndeclaredFields(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	role := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r1","namespace":"default"},
		"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"],"bogus":"1"}]}`
	_, _, err := s.Apply(ctx, kinds.RoleResource, "default", "r1", []byte(role), applyOpts("kubectl", false))
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), ".rules[0].bogus: field not declared in schema") {
		t.Fatalf("apply with an undeclared field: %v", err)
	}

	var u unstructured.Unstructured
	if err := json.Unmarshal([]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n1"},
		"spec":{"bogus":"1","finalizers":["kubernetes"]}}`), &u.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, kinds.NamespaceResource, &u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The field is put in the stored document behind the API's back.
	sv := s.reg.ByGroupResource(kinds.NamespaceResource.GroupResource())
	addBogus := func() {
		t.Helper()
		k := key(sv, "", "n1")
		kv, err := s.store.Get(ctx, k, store.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored, err := sv.Decode(kv)
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(stored.Object, "1", "spec", "bogus")
		b, err := sv.Encode(stored)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.store.Update(ctx, k, b, kv.ModRevision); err != nil {
			t.Fatal(err)
		}
	}
	addBogus()
	obj, _, err := s.Apply(ctx, kinds.NamespaceResource, "", "n1",
		[]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n1","labels":{"team":"x"}}}`), applyOpts("kubectl", false))
	if err != nil {
		t.Fatalf("apply to a stored object with an undeclared field: %v", err)
	}
	got := fieldsOf(t, obj)
	want := map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{"f:team": map[string]any{}}}}
	if diff := cmp.Diff(want, got["kubectl/Apply"]); diff != "" {
		t.Fatalf("applier's managedFields (-want +got):\n%s", diff)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "bogus"); found {
		t.Fatalf("the apply kept spec.bogus: %v", obj.Object["spec"])
	}
	// An update of an object that holds one is recorded too, and drops it.
	addBogus()
	if obj, err = s.Get(ctx, kinds.NamespaceResource, "", "n1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	obj.SetAnnotations(map[string]string{"a": "b"})
	if obj, err = s.Update(ctx, kinds.NamespaceResource, obj, metav1.UpdateOptions{FieldManager: "annotator"}); err != nil {
		t.Fatal(err)
	}
	want = map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{".": map[string]any{}, "f:a": map[string]any{}}}}
	if diff := cmp.Diff(want, fieldsOf(t, obj)["annotator/Update"]); diff != "" {
		t.Fatalf("updater's managedFields (-want +got):\n%s", diff)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "bogus"); found {
		t.Fatalf("the update kept spec.bogus: %v", obj.Object["spec"])
	}
}
