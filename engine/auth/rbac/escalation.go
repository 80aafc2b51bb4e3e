package rbac

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/setpoint-dev/setpoint/engine"
)

// Escalation is the admission step that keeps users from gaining
// permissions through RBAC, exactly as kube-apiserver's RBAC storage does:
//
//   - creating or updating a Role or ClusterRole needs every permission its
//     rules grant, unless the user may "escalate" that role; an
//     aggregationRule, which can gather anything, needs every permission
//     (cluster-admin's);
//   - creating or updating a RoleBinding or ClusterRoleBinding needs every
//     permission of the role it refers to (in the binding's namespace),
//     unless the user may "bind" that role (resourceNames name roles);
//   - an update that only changes what the garbage collector changes
//     (ownerReferences, finalizers) is not checked; nor is a write by the
//     group system:masters, nor one without a user (the server's own).
type Escalation struct {
	a *Authorizer
}

var _ engine.Admitter = Escalation{}

// NewEscalation returns the escalation checks, deciding with a.
func NewEscalation(a *Authorizer) Escalation { return Escalation{a: a} }

// Mutate implements engine.Admitter: it changes nothing.
func (Escalation) Mutate(context.Context, *engine.AdmissionRequest, func()) error { return nil }

// Validate implements engine.Admitter.
func (e Escalation) Validate(ctx context.Context, req *engine.AdmissionRequest) error {
	if req.Resource.Group != rbacv1.GroupName || req.Subresource != "" ||
		(req.Operation != engine.OpCreate && req.Operation != engine.OpUpdate) || req.Object == nil {
		return nil
	}
	u := req.User
	if u == nil || slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return nil
	}
	if req.Operation == engine.OpUpdate && onlyGCFields(req.Object, req.OldObject) {
		return nil
	}
	gr := req.Resource.GroupResource()
	forbidden := func(err error) error { return apierrors.NewForbidden(gr, req.Name, err) }
	switch req.Resource.Resource {
	case "roles", "clusterroles":
		// Kubernetes asks about the request's name, which a create (a POST
		// to the collection) does not have: escalate limited by
		// resourceNames allows updates of those roles only.
		name := req.Name
		if req.Operation == engine.OpCreate {
			name = ""
		}
		if e.allowed(ctx, u, "escalate", req.Resource.Resource, name, req.Namespace) {
			return nil
		}
		if req.Resource.Resource == "roles" {
			var r rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(req.Object.Object, &r); err != nil {
				return apierrors.NewBadRequest(err.Error())
			}
			if err := e.confirmNoEscalation(ctx, u, req.Namespace, r.Rules); err != nil {
				return forbidden(err)
			}
			return nil
		}
		var r, old rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(req.Object.Object, &r); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		if req.OldObject != nil {
			_ = runtime.DefaultUnstructuredConverter.FromUnstructured(req.OldObject.Object, &old)
		}
		if err := e.confirmNoEscalation(ctx, u, "", r.Rules); err != nil {
			return forbidden(err)
		}
		if hasAggregationRule(&r) || hasAggregationRule(&old) {
			if err := e.confirmNoEscalation(ctx, u, "", fullAuthority); err != nil {
				return forbidden(errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
		return nil
	case "rolebindings", "clusterrolebindings":
		var ref rbacv1.RoleRef
		if m, ok := req.Object.Object["roleRef"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ref); err != nil {
				return apierrors.NewBadRequest(err.Error())
			}
		}
		ns := req.Namespace
		if req.Resource.Resource == "clusterrolebindings" {
			ns = ""
		}
		if e.bindAllowed(ctx, u, ref, ns) {
			return nil
		}
		rules, err := e.a.RoleRules(ctx, ref, ns)
		if err != nil {
			return forbidden(err)
		}
		if err := e.confirmNoEscalation(ctx, u, ns, rules); err != nil {
			return forbidden(err)
		}
	}
	return nil
}

// allowed asks the authorizer whether u may verb the RBAC resource name.
func (e Escalation) allowed(ctx context.Context, u user.Info, verb, resource, name, ns string) bool {
	d, _, err := e.a.Authorize(ctx, authorizer.AttributesRecord{
		User: u, Verb: verb, APIGroup: rbacv1.GroupName, APIVersion: "*", Resource: resource,
		Name: name, Namespace: ns, ResourceRequest: true,
	})
	return err == nil && d == authorizer.DecisionAllow
}

// bindAllowed tells whether u may "bind" the role ref in namespace ns (""
// for a ClusterRoleBinding).
func (e Escalation) bindAllowed(ctx context.Context, u user.Info, ref rbacv1.RoleRef, ns string) bool {
	var resource string
	switch ref.Kind {
	case "ClusterRole":
		resource = "clusterroles"
	case "Role":
		resource = "roles"
	default:
		return false
	}
	d, _, err := e.a.Authorize(ctx, authorizer.AttributesRecord{
		User: u, Verb: "bind", APIGroup: ref.APIGroup, Resource: resource, Name: ref.Name,
		Namespace: ns, ResourceRequest: true,
	})
	return err == nil && d == authorizer.DecisionAllow
}

// confirmNoEscalation refuses rules that u does not hold in ns, naming the
// missing ones as Kubernetes does.
func (e Escalation) confirmNoEscalation(ctx context.Context, u user.Info, ns string, rules []rbacv1.PolicyRule) error {
	owner, resolveErr := e.a.PolicyRules(ctx, u, ns)
	covers, missing := validation.Covers(owner, rules)
	if covers {
		return nil
	}
	var lines []string
	for _, r := range compactRules(missing) {
		lines = append(lines, compactString(r))
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.GetName(), u.GetGroups(), strings.Join(lines, "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: %v", resolveErr)
	}
	return errors.New(msg)
}

func hasAggregationRule(r *rbacv1.ClusterRole) bool {
	return r.AggregationRule != nil && len(r.AggregationRule.ClusterRoleSelectors) > 0
}

// onlyGCFields reports whether obj differs from old only in what the
// garbage collector changes (ownerReferences, finalizers) or the server
// sets (managedFields, resourceVersion, generation).
func onlyGCFields(obj, old *unstructured.Unstructured) bool {
	if old == nil {
		return false
	}
	c := obj.DeepCopy()
	c.SetOwnerReferences(old.GetOwnerReferences())
	c.SetFinalizers(old.GetFinalizers())
	c.SetSelfLink(old.GetSelfLink())
	c.SetManagedFields(old.GetManagedFields())
	c.SetResourceVersion(old.GetResourceVersion())
	c.SetGeneration(old.GetGeneration())
	return equality.Semantic.DeepEqual(c.Object, old.Object)
}

// compactRules merges the single-verb rules the comparator reports missing
// into one rule per group, resource and name, as Kubernetes' message does.
func compactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	at := map[string]int{}
	for _, r := range rules {
		key := fmt.Sprintf("%q|%q|%q|%q", r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs)
		if i, ok := at[key]; ok {
			for _, v := range r.Verbs {
				if !slices.Contains(out[i].Verbs, v) {
					out[i].Verbs = append(out[i].Verbs, v)
				}
			}
			continue
		}
		at[key] = len(out)
		out = append(out, *r.DeepCopy())
	}
	return out
}

// compactString writes a rule as Kubernetes' CompactString does.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
