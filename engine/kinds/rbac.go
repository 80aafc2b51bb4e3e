package kinds

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
)

// The rbac.authorization.k8s.io/v1 resources.
var (
	RoleResource               = rbacv1.SchemeGroupVersion.WithResource("roles")
	ClusterRoleResource        = rbacv1.SchemeGroupVersion.WithResource("clusterroles")
	RoleBindingResource        = rbacv1.SchemeGroupVersion.WithResource("rolebindings")
	ClusterRoleBindingResource = rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings")
)

// rbacBuiltins are the RBAC kinds, served as kube-apiserver serves them:
// decoded into their Go types (unknown fields dropped, v1 defaults set) and
// validated by Kubernetes' rules for them.
func rbacBuiltins() []*Kind {
	ks := []*Kind{
		newBuiltin(RoleResource, "Role", "role", true, false, rbacName, validateRBAC[rbacv1.Role](validateRole),
			nil, &rbacv1.Role{}, []string{"rules"}),
		newBuiltin(ClusterRoleResource, "ClusterRole", "clusterrole", false, false, rbacName, validateRBAC[rbacv1.ClusterRole](validateClusterRole),
			nil, &rbacv1.ClusterRole{}, []string{"rules", "aggregationRule"}),
		newBuiltin(RoleBindingResource, "RoleBinding", "rolebinding", true, false, rbacName, validateRBAC[rbacv1.RoleBinding](validateRoleBinding),
			nil, &rbacv1.RoleBinding{}, []string{"roleRef", "subjects"}),
		newBuiltin(ClusterRoleBindingResource, "ClusterRoleBinding", "clusterrolebinding", false, false, rbacName, validateRBAC[rbacv1.ClusterRoleBinding](validateClusterRoleBinding),
			nil, &rbacv1.ClusterRoleBinding{}, []string{"roleRef", "subjects"}),
	}
	for _, k := range ks {
		k.strategy = rbacStrategy{k.strategy.(builtinStrategy)}
	}
	// kube-apiserver's tables: its default one for roles (NAME, CREATED AT
	// as RFC 3339), its printers' for bindings.
	ks[0].table = rest.NewDefaultTableConvertor(RoleResource.GroupResource())
	ks[1].table = rest.NewDefaultTableConvertor(ClusterRoleResource.GroupResource())
	ks[2].table = bindingTable(false)
	ks[3].table = bindingTable(true)
	return ks
}

// rbacName is Kubernetes' ValidateRBACName: any name that is a path
// segment ("system:basic-user" is one).
func rbacName(name string, prefix bool) []string { return path.ValidatePathSegmentName(name, prefix) }

// rbacStrategy decodes each write into the kind's Go type and back before
// the builtin strategy runs, as a typed decoder does: nested unknown fields
// are dropped and the v1 defaults set (a subject's and a roleRef's
// apiGroup). An object that does not decode is left as it is, for
// validation to refuse.
type rbacStrategy struct{ builtinStrategy }

func (s rbacStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	normalizeRBAC(obj.(*unstructured.Unstructured))
	s.builtinStrategy.PrepareForCreate(ctx, obj)
}

func (s rbacStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	normalizeRBAC(obj.(*unstructured.Unstructured))
	s.builtinStrategy.PrepareForUpdate(ctx, obj, old)
}

func normalizeRBAC(u *unstructured.Unstructured) {
	var typed any
	switch u.GetKind() {
	case "Role":
		typed = &rbacv1.Role{}
	case "ClusterRole":
		typed = &rbacv1.ClusterRole{}
	case "RoleBinding":
		typed = &rbacv1.RoleBinding{}
	case "ClusterRoleBinding":
		typed = &rbacv1.ClusterRoleBinding{}
	default:
		return
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		return
	}
	switch t := typed.(type) {
	case *rbacv1.RoleBinding:
		defaultBinding(&t.RoleRef, t.Subjects)
	case *rbacv1.ClusterRoleBinding:
		defaultBinding(&t.RoleRef, t.Subjects)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return
	}
	for k := range u.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			delete(u.Object, k)
		}
	}
	for k, v := range m {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			u.Object[k] = v
		}
	}
}

// defaultBinding sets the rbac/v1 defaults of a binding: the roleRef's
// apiGroup, and a User's or Group's apiGroup.
func defaultBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		if s := &subjects[i]; s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// validateRBAC decodes obj (and old) into T and runs fn on them.
func validateRBAC[T any](fn func(obj, old *T) field.ErrorList) func(context.Context, *unstructured.Unstructured, *unstructured.Unstructured) field.ErrorList {
	return func(_ context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
		var t T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &t); err != nil {
			return field.ErrorList{field.Invalid(field.NewPath(""), nil, fmt.Sprintf("does not decode: %v", err))}
		}
		if old == nil {
			return fn(&t, nil)
		}
		var o T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(old.Object, &o); err != nil {
			return fn(&t, nil)
		}
		return fn(&t, &o)
	}
}

func validateRole(r, _ *rbacv1.Role) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range r.Rules {
		errs = append(errs, validatePolicyRule(rule, true, field.NewPath("rules").Index(i))...)
	}
	return errs
}

func validateClusterRole(r, _ *rbacv1.ClusterRole) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range r.Rules {
		errs = append(errs, validatePolicyRule(rule, false, field.NewPath("rules").Index(i))...)
	}
	if r.AggregationRule != nil {
		p := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(r.AggregationRule.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range r.AggregationRule.ClusterRoleSelectors {
			sel := &r.AggregationRule.ClusterRoleSelectors[i]
			errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				errs = append(errs, field.Invalid(p.Index(i), sel, "invalid label selector."))
			}
		}
	}
	return errs
}

// validatePolicyRule is Kubernetes' rule validation: verbs are required; a
// rule names either non-resource URLs (in ClusterRoles only) or API groups
// and resources.
func validatePolicyRule(rule rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

func validateRoleBinding(b, old *rbacv1.RoleBinding) field.ErrorList {
	errs := validateRoleRef(b.RoleRef, []string{"Role", "ClusterRole"})
	for i, s := range b.Subjects {
		errs = append(errs, validateSubject(s, true, field.NewPath("subjects").Index(i))...)
	}
	if old != nil && old.RoleRef != b.RoleRef {
		errs = append(errs, field.Invalid(field.NewPath("roleRef"), b.RoleRef, "cannot change roleRef"))
	}
	return errs
}

func validateClusterRoleBinding(b, old *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := validateRoleRef(b.RoleRef, []string{"ClusterRole"})
	for i, s := range b.Subjects {
		errs = append(errs, validateSubject(s, false, field.NewPath("subjects").Index(i))...)
	}
	if old != nil && old.RoleRef != b.RoleRef {
		errs = append(errs, field.Invalid(field.NewPath("roleRef"), b.RoleRef, "cannot change roleRef"))
	}
	return errs
}

func validateRoleRef(ref rbacv1.RoleRef, kinds []string) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	ok := false
	for _, k := range kinds {
		ok = ok || ref.Kind == k
	}
	if !ok {
		errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range rbacName(ref.Name, false) {
			errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

func validateSubject(s rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range apivalidation.NameIsDNSSubdomain(s.Name, false) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}
