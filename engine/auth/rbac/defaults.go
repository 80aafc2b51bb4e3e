package rbac

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/auth/rbac/reconciliation"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// The labels aggregated ClusterRoles select, Kubernetes' own.
const (
	AggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

// bootstrapLabel marks the default roles and bindings, as Kubernetes marks
// its own.
var bootstrapLabel = map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}

var (
	read      = []string{"get", "list", "watch"}
	write     = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite = append(append([]string{}, read...), write...)
)

// rule and urls make a rule as Kubernetes' bootstrap policy makes its
// rules: each list sorted, without repeats.
func rule(verbs []string, group string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: sorted(verbs), APIGroups: []string{group}, Resources: sorted(resources)}
}

func urls(verbs []string, paths ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: sorted(verbs), NonResourceURLs: sorted(paths)}
}

func sorted(s []string) []string { return slices.Compact(slices.Sorted(slices.Values(s))) }

func selectLabel(label string) *rbacv1.AggregationRule {
	return &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}
}

// DefaultClusterRoles are the ClusterRoles every server ensures: those of
// Kubernetes' bootstrap policy that apply to what Setpoint serves, with
// Kubernetes' rules for them. admin, edit and view are aggregated, as in
// Kubernetes, from the system:aggregate-to-* roles, which grant the core
// kinds Setpoint serves (namespaces, events, ServiceAccounts and their
// tokens) and, for admin, Roles and RoleBindings. Like Kubernetes' roles,
// they grant nothing on custom resources: a CRD's author labels a
// ClusterRole of its own with aggregate-to-admin/edit/view to add them.
func DefaultClusterRoles() []rbacv1.ClusterRole {
	roles := []rbacv1.ClusterRole{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"},
			Rules: []rbacv1.PolicyRule{
				rule([]string{"*"}, "*", "*"),
				urls([]string{"*"}, "*"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:discovery"},
			Rules: []rbacv1.PolicyRule{urls([]string{"get"},
				"/livez", "/readyz", "/healthz", "/version", "/version/",
				"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*")},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:public-info-viewer"},
			Rules:      []rbacv1.PolicyRule{urls([]string{"get"}, "/livez", "/readyz", "/healthz", "/version", "/version/")},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:service-account-issuer-discovery"},
			Rules: []rbacv1.PolicyRule{urls([]string{"get"},
				"/.well-known/openid-configuration", "/.well-known/openid-configuration/",
				"/openid/v1/jwks", "/openid/v1/jwks/")},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:basic-user"},
			Rules: []rbacv1.PolicyRule{
				rule([]string{"create"}, "authorization.k8s.io", "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
				rule([]string{"create"}, "authentication.k8s.io", "selfsubjectreviews"),
			},
		},
		{ObjectMeta: metav1.ObjectMeta{Name: "admin"}, AggregationRule: selectLabel(AggregateToAdmin)},
		{ObjectMeta: metav1.ObjectMeta{Name: "edit", Labels: map[string]string{AggregateToAdmin: "true"}}, AggregationRule: selectLabel(AggregateToEdit)},
		{ObjectMeta: metav1.ObjectMeta{Name: "view", Labels: map[string]string{AggregateToEdit: "true"}}, AggregationRule: selectLabel(AggregateToView)},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-admin", Labels: map[string]string{AggregateToAdmin: "true"}},
			Rules: []rbacv1.PolicyRule{
				rule([]string{"create"}, "authorization.k8s.io", "localsubjectaccessreviews"),
				rule(readWrite, rbacv1.GroupName, "roles", "rolebindings"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-edit", Labels: map[string]string{AggregateToEdit: "true"}},
			Rules: []rbacv1.PolicyRule{
				rule([]string{"impersonate"}, "", "serviceaccounts"),
				rule(write, "", "serviceaccounts"),
				rule([]string{"create"}, "", "serviceaccounts/token"),
				rule(readWrite, "", "secrets"), // not in view: reading them is sensitive
				rule(write, "", "configmaps"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-view", Labels: map[string]string{AggregateToView: "true"}},
			Rules: []rbacv1.PolicyRule{
				rule(read, "", "serviceaccounts"),
				rule(read, "", "events", "namespaces/status"),
				rule(read, "", "namespaces"),
				rule(read, "", "configmaps"),
			},
		},
	}
	for i := range roles {
		addDefaultMeta(&roles[i].ObjectMeta)
	}
	return roles
}

// DefaultClusterRoleBindings are the ClusterRoleBindings every server
// ensures, Kubernetes' own.
func DefaultClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	bind := func(role string, groups ...string) rbacv1.ClusterRoleBinding {
		b := rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		}
		for _, g := range groups {
			b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
		}
		addDefaultMeta(&b.ObjectMeta)
		return b
	}
	return []rbacv1.ClusterRoleBinding{
		bind("cluster-admin", user.SystemPrivilegedGroup),
		bind("system:discovery", user.AllAuthenticated),
		bind("system:basic-user", user.AllAuthenticated),
		bind("system:public-info-viewer", user.AllAuthenticated, user.AllUnauthenticated),
		bind("system:service-account-issuer-discovery", serviceaccount.AllServiceAccountsGroup),
	}
}

func addDefaultMeta(m *metav1.ObjectMeta) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	for k, v := range bootstrapLabel {
		m.Labels[k] = v
	}
	m.Annotations = map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"}
}

// EnsureDefaults creates the default ClusterRoles and ClusterRoleBindings
// that are missing and reconciles those that exist, as kube-apiserver does
// at start (component-helpers' reconciliation, in its union mode): missing
// rules, aggregation selectors, subjects, labels and annotations are added,
// nothing is removed, and an object annotated
// rbac.authorization.kubernetes.io/autoupdate: "false" is left alone.
// A write that conflicts with another server's is retried.
func EnsureDefaults(ctx context.Context, c Client) error {
	// The objects written are encoded from rbacv1 types, in the shape the
	// kinds store: the engine need not decode them into their Go types
	// again (which would parse the API's schema at every first start).
	ctx = kinds.WithBuiltShape(ctx)
	roles := clusterRoles{ctx: ctx, c: c}
	for _, r := range DefaultClusterRoles() {
		opts := reconciliation.ReconcileRoleOptions{
			Role: reconciliation.ClusterRoleRuleOwner{ClusterRole: &r}, Client: roles, Confirm: true,
		}
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { _, err := opts.Run(); return err }); err != nil {
			return fmt.Errorf("rbac: ensure clusterrole %s: %w", r.Name, err)
		}
	}
	bindings := clusterRoleBindings{ctx: ctx, c: c}
	for _, b := range DefaultClusterRoleBindings() {
		opts := reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &b}, Client: bindings, Confirm: true,
		}
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { _, err := opts.Run(); return err }); err != nil {
			return fmt.Errorf("rbac: ensure clusterrolebinding %s: %w", b.Name, err)
		}
	}
	return nil
}

// clusterRoles is reconciliation's client of ClusterRoles, over the engine.
type clusterRoles struct {
	ctx context.Context
	c   Client
}

var _ reconciliation.RuleOwnerModifier = clusterRoles{}

func (m clusterRoles) Get(_, name string) (reconciliation.RuleOwner, error) {
	r := &rbacv1.ClusterRole{}
	if err := get(m.ctx, m.c, kinds.ClusterRoleResource, "", name, r); err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: r}, nil
}

func (m clusterRoles) Create(in reconciliation.RuleOwner) (reconciliation.RuleOwner, error) {
	r := &rbacv1.ClusterRole{}
	if err := create(m.ctx, m.c, kinds.ClusterRoleResource, "ClusterRole", in.GetObject(), r); err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: r}, nil
}

func (m clusterRoles) Update(in reconciliation.RuleOwner) (reconciliation.RuleOwner, error) {
	r := &rbacv1.ClusterRole{}
	if err := update(m.ctx, m.c, kinds.ClusterRoleResource, "ClusterRole", in.GetObject(), r); err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: r}, nil
}

// clusterRoleBindings is reconciliation's client of ClusterRoleBindings,
// over the engine.
type clusterRoleBindings struct {
	ctx context.Context
	c   Client
}

var _ reconciliation.RoleBindingModifier = clusterRoleBindings{}

func (m clusterRoleBindings) Get(_, name string) (reconciliation.RoleBinding, error) {
	b := &rbacv1.ClusterRoleBinding{}
	if err := get(m.ctx, m.c, kinds.ClusterRoleBindingResource, "", name, b); err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b}, nil
}

func (m clusterRoleBindings) Create(in reconciliation.RoleBinding) (reconciliation.RoleBinding, error) {
	b := &rbacv1.ClusterRoleBinding{}
	if err := create(m.ctx, m.c, kinds.ClusterRoleBindingResource, "ClusterRoleBinding", in.GetObject(), b); err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b}, nil
}

func (m clusterRoleBindings) Update(in reconciliation.RoleBinding) (reconciliation.RoleBinding, error) {
	b := &rbacv1.ClusterRoleBinding{}
	if err := update(m.ctx, m.c, kinds.ClusterRoleBindingResource, "ClusterRoleBinding", in.GetObject(), b); err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b}, nil
}

func (m clusterRoleBindings) Delete(_, name string, uid types.UID) error {
	return m.c.Delete(m.ctx, kinds.ClusterRoleBindingResource, "", name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

func get(ctx context.Context, c Client, gvr schema.GroupVersionResource, ns, name string, into any) error {
	u, err := c.Get(ctx, gvr, ns, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

func toUnstructured(gvr schema.GroupVersionResource, kind string, obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	return u, nil
}

func create(ctx context.Context, c Client, gvr schema.GroupVersionResource, kind string, obj runtime.Object, into any) error {
	u, err := toUnstructured(gvr, kind, obj)
	if err != nil {
		return err
	}
	out, err := c.Create(ctx, gvr, u, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(out.Object, into)
}

func update(ctx context.Context, c Client, gvr schema.GroupVersionResource, kind string, obj runtime.Object, into any) error {
	u, err := toUnstructured(gvr, kind, obj)
	if err != nil {
		return err
	}
	out, err := c.Update(ctx, gvr, u, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(out.Object, into)
}
