package kinds

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func rbacObject(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRBACValidation runs Kubernetes' validation of the RBAC kinds: each
// case is one of kube-apiserver's acceptances or refusals.
func TestRBACValidation(t *testing.T) {
	reg := NewRegistry()
	tests := []struct {
		name    string
		gvr     schema.GroupVersionResource
		doc     string
		wantErr string // "" for valid
	}{
		{"role", RoleResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: default}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]`, ""},
		{"role without verbs", RoleResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: default}
rules: [{apiGroups: [""], resources: [pods]}]`, "rules[0].verbs: Required value"},
		{"role without apiGroups", RoleResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: default}
rules: [{resources: [pods], verbs: [get]}]`, "rules[0].apiGroups: Required value"},
		{"role without resources", RoleResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: default}
rules: [{apiGroups: [""], verbs: [get]}]`, "rules[0].resources: Required value"},
		{"role with nonResourceURLs", RoleResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: default}
rules: [{nonResourceURLs: [/metrics], verbs: [get]}]`, "namespaced rules cannot apply to non-resource URLs"},
		{"clusterrole with nonResourceURLs", ClusterRoleResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:metrics"}
rules: [{nonResourceURLs: [/metrics], verbs: [get]}]`, ""},
		{"clusterrole mixing URLs and resources", ClusterRoleResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: c}
rules: [{nonResourceURLs: [/metrics], resources: [pods], apiGroups: [""], verbs: [get]}]`, "rules cannot apply to both regular resources and non-resource URLs"},
		{"clusterrole with empty aggregationRule", ClusterRoleResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: c}
aggregationRule: {clusterRoleSelectors: []}`, "at least one clusterRoleSelector required"},
		{"clusterrole with aggregationRule", ClusterRoleResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: c}
aggregationRule: {clusterRoleSelectors: [{matchLabels: {a: "true"}}]}`, ""},
		{"rolebinding defaults apiGroups", RoleBindingResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: b, namespace: default}
roleRef: {kind: ClusterRole, name: view}
subjects: [{kind: User, name: jane}, {kind: Group, name: devs}, {kind: ServiceAccount, name: bot}]`, ""},
		{"rolebinding with wrong roleRef kind", RoleBindingResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: b, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Widget, name: view}`, `roleRef.kind: Unsupported value: "Widget"`},
		{"rolebinding with wrong roleRef apiGroup", RoleBindingResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: b, namespace: default}
roleRef: {apiGroup: example.com, kind: Role, name: view}`, `roleRef.apiGroup: Unsupported value: "example.com"`},
		{"rolebinding without roleRef name", RoleBindingResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: b, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role}`, "roleRef.name: Required value"},
		{"rolebinding with unknown subject kind", RoleBindingResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: b, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects: [{kind: Robot, name: r2}]`, `subjects[0].kind: Unsupported value: "Robot"`},
		{"serviceaccount subject with apiGroup", RoleBindingResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: b, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects: [{kind: ServiceAccount, name: bot, apiGroup: rbac.authorization.k8s.io}]`, "subjects[0].apiGroup: Unsupported value"},
		{"clusterrolebinding to a Role", ClusterRoleBindingResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}`, `roleRef.kind: Unsupported value: "Role"`},
		{"clusterrolebinding serviceaccount without namespace", ClusterRoleBindingResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: bot}]`, "subjects[0].namespace: Required value"},
		{"subject without name", ClusterRoleBindingResource, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io}]`, "subjects[0].name: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, ok := reg.Get(tt.gvr)
			if !ok {
				t.Fatalf("%v not served", tt.gvr)
			}
			obj := rbacObject(t, tt.doc)
			k.strategy.PrepareForCreate(context.Background(), obj)
			errs := k.strategy.Validate(context.Background(), obj)
			switch {
			case tt.wantErr == "" && len(errs) > 0:
				t.Fatalf("refused: %v", errs.ToAggregate())
			case tt.wantErr != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.wantErr)):
				t.Fatalf("errors %v, want one with %q", errs.ToAggregate(), tt.wantErr)
			}
		})
	}
}

// TestRBACDefaults checks the rbac/v1 defaults a typed decoder sets and the
// unknown nested fields it drops.
func TestRBACDefaults(t *testing.T) {
	k, _ := NewRegistry().Get(RoleBindingResource)
	obj := rbacObject(t, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: b, namespace: default}
roleRef: {kind: ClusterRole, name: view, color: red}
subjects: [{kind: User, name: jane}, {kind: ServiceAccount, name: bot}]`)
	k.strategy.PrepareForCreate(context.Background(), obj)
	if g, _, _ := unstructured.NestedString(obj.Object, "roleRef", "apiGroup"); g != "rbac.authorization.k8s.io" {
		t.Errorf("roleRef.apiGroup = %q", g)
	}
	if _, found, _ := unstructured.NestedString(obj.Object, "roleRef", "color"); found {
		t.Errorf("unknown field roleRef.color kept")
	}
	subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
	if g := subjects[0].(map[string]any)["apiGroup"]; g != "rbac.authorization.k8s.io" {
		t.Errorf("User subject apiGroup = %v", g)
	}
	if g, ok := subjects[1].(map[string]any)["apiGroup"]; ok && g != "" {
		t.Errorf("ServiceAccount subject apiGroup = %v", g)
	}
}

// TestRBACRoleRefImmutable checks that a binding's roleRef cannot change.
func TestRBACRoleRefImmutable(t *testing.T) {
	k, _ := NewRegistry().Get(ClusterRoleBindingResource)
	old := rbacObject(t, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b, resourceVersion: "1"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}`)
	obj := old.DeepCopy()
	if errs := k.strategy.ValidateUpdate(context.Background(), obj, old); len(errs) > 0 {
		t.Fatalf("unchanged binding refused: %v", errs.ToAggregate())
	}
	_ = unstructured.SetNestedField(obj.Object, "edit", "roleRef", "name")
	errs := k.strategy.ValidateUpdate(context.Background(), obj, old)
	if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "cannot change roleRef") {
		t.Fatalf("errors %v, want cannot change roleRef", errs.ToAggregate())
	}
}
