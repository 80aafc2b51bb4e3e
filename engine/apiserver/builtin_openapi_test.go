package apiserver

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// refs returns every "$ref" in a decoded JSON document.
func refs(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "$ref" {
				out = append(out, s)
			}
			out = refs(e, out)
		}
	case []any:
		for _, e := range v {
			out = refs(e, out)
		}
	}
	return out
}

// TestBuiltinDocumentsAreKubernetesShaped: each built-in group version's
// OpenAPI v3 document is whole (every reference names one of its models),
// each kind's model is named and tagged as kube-apiserver names and tags it,
// a field of another type refers to that type's model as allOf with the
// field's description (what kubectl explain follows), and only the kinds
// with a status subresource have its paths.
func TestBuiltinDocumentsAreKubernetesShaped(t *testing.T) {
	built, err := builtinDocuments()
	if err != nil {
		t.Fatal(err)
	}
	decoded := map[schema.GroupVersion]map[string]any{}
	for gv, doc := range built.docs {
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		decoded[gv] = m
		models, _ := m["components"].(map[string]any)["schemas"].(map[string]any)
		for _, r := range refs(m, nil) {
			name, ok := strings.CutPrefix(r, "#/components/schemas/")
			if _, found := models[name]; !ok || !found {
				t.Errorf("%s: reference %q names no model of the document", gv, r)
			}
		}
	}
	model := func(gv schema.GroupVersion, name string) map[string]any {
		t.Helper()
		m, _ := decoded[gv]["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
		if m == nil {
			t.Fatalf("%s lacks the model %s", gv, name)
		}
		return m
	}
	core := schema.GroupVersion{Version: "v1"}
	rbac := schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	crds := schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1"}
	for _, tt := range []struct {
		gv           schema.GroupVersion
		name, kind   string
		field, type_ string
	}{
		{core, "io.k8s.api.core.v1.Namespace", "Namespace", "spec", "io.k8s.api.core.v1.NamespaceSpec"},
		{core, "io.k8s.api.core.v1.ConfigMap", "ConfigMap", "metadata", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
		{core, "io.k8s.api.core.v1.Event", "Event", "involvedObject", "io.k8s.api.core.v1.ObjectReference"},
		{rbac, "io.k8s.api.rbac.v1.RoleBinding", "RoleBinding", "roleRef", "io.k8s.api.rbac.v1.RoleRef"},
		{crds, "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition", "CustomResourceDefinition", "spec",
			"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec"},
	} {
		m := model(tt.gv, tt.name)
		want := []any{map[string]any{"group": tt.gv.Group, "version": tt.gv.Version, "kind": tt.kind}}
		if diff := cmp.Diff(want, m["x-kubernetes-group-version-kind"]); diff != "" {
			t.Errorf("%s: group, version and kind (-want +got):\n%s", tt.name, diff)
		}
		f, _ := m["properties"].(map[string]any)[tt.field].(map[string]any)
		wantField := []any{map[string]any{"$ref": "#/components/schemas/" + tt.type_}}
		if diff := cmp.Diff(wantField, f["allOf"]); diff != "" || f["description"] == "" {
			t.Errorf("%s.%s = %v, want a description and allOf a reference to %s", tt.name, tt.field, f, tt.type_)
		}
	}
	rules, _ := model(rbac, "io.k8s.api.rbac.v1.Role")["properties"].(map[string]any)["rules"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"$ref": "#/components/schemas/io.k8s.api.rbac.v1.PolicyRule"}, rules["items"]); diff != "" {
		t.Errorf("Role.rules items (-want +got):\n%s", diff)
	}
	coordination := schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}
	model(coordination, "io.k8s.api.coordination.v1.Lease")
	if !built.byCRD[coordination] || built.byCRD[core] || built.byCRD[rbac] {
		t.Errorf("described while a CRD serves them: %v, want only %s", built.byCRD, coordination)
	}
	// A review kind is only created.
	authz := schema.GroupVersion{Group: "authorization.k8s.io", Version: "v1"}
	model(authz, "io.k8s.api.authorization.v1.SelfSubjectAccessReview")
	var reviewPaths []string
	for p, item := range decoded[authz]["paths"].(map[string]any) {
		ops := []string{}
		for op := range item.(map[string]any) {
			if op == "get" || op == "put" || op == "post" || op == "delete" || op == "patch" {
				ops = append(ops, op)
			}
		}
		reviewPaths = append(reviewPaths, p+" "+strings.Join(ops, ","))
	}
	slices.Sort(reviewPaths)
	if diff := cmp.Diff([]string{
		"/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews post",
		"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews post",
		"/apis/authorization.k8s.io/v1/selfsubjectrulesreviews post",
		"/apis/authorization.k8s.io/v1/subjectaccessreviews post",
	}, reviewPaths); diff != "" {
		t.Errorf("review paths (-want +got):\n%s", diff)
	}
	paths, _ := decoded[core]["paths"].(map[string]any)
	for p, want := range map[string]bool{
		"/api/v1/namespaces/{name}":                                    true,
		"/api/v1/namespaces/{name}/status":                             true,
		"/api/v1/namespaces/{namespace}/events/{name}/status":          false,
		"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/status": false,
	} {
		if _, got := paths[p]; got != want {
			t.Errorf("core document has path %s: %v, want %v", p, got, want)
		}
	}
}
