package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/component-helpers/auth/rbac/validation"
	"k8s.io/utils/ptr"

	"github.com/setpoint-dev/setpoint/engine"
)

// A Plugin's permissions are RBAC rules: the manager keeps a ClusterRole
// named RoleName(plugin) with them, bound by a ClusterRoleBinding of the
// same name to the plugin's user, both owned by the Plugin (the garbage
// collector deletes them with it). `kubectl get clusterroles` shows them,
// and `kubectl auth can-i --as` answers for the plugin.

// RoleName is the name of the ClusterRole (and ClusterRoleBinding) of a
// plugin's permissions.
func RoleName(plugin string) string { return "setpoint:plugin:" + plugin }

// roleFieldManager manages the plugins' ClusterRoles and bindings.
const roleFieldManager = "setpoint-plugin-manager"

var (
	readVerbs    = []string{"get", "list", "watch"}
	writeVerbs   = []string{"create", "update", "patch", "delete"}
	mutateVerbs  = []string{"get", "list", "watch", "create", "update", "patch"}
	ownVerbs     = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	forVerbs     = []string{"get", "list", "watch", "update", "patch"}
	statusVerbs  = []string{"update", "patch"}
	emitVerbs    = []string{"create", "update", "patch"}
	allResources = schema.GroupResource{Group: "*", Resource: "*"}
)

// PolicyRules are the RBAC rules of what the spec lets the plugin do:
// reading and writing the kinds of permissions.read and write (and their
// status; "*" every kind; "events" emitting Events), keeping the reconciled kind and its
// status, managing the children's kinds, and seeing (validating) or
// changing (mutating) the writes it admits.
func (sp Spec) PolicyRules() []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	events := false
	add := func(verbs []string, name string) {
		if name == "events" {
			if events {
				return
			}
			events = true
		}
		gr := allResources
		if name != "*" {
			gr = schema.ParseGroupResource(name)
		}
		rules = append(rules, rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{gr.Group}, Resources: []string{gr.Resource}})
	}
	for _, r := range sp.Permissions.Read {
		add(readVerbs, r)
	}
	for _, w := range sp.Permissions.Write {
		switch w {
		case "events":
			add(emitVerbs, "events")
		case "*":
			add(writeVerbs, "*")
			add(emitVerbs, "events")
		default:
			// The host's writes of a kind take its status too.
			add(writeVerbs, w)
			gr := schema.ParseGroupResource(w)
			add(statusVerbs, schema.GroupResource{Group: gr.Group, Resource: gr.Resource + "/status"}.String())
		}
	}
	if rb := sp.Reconcile; rb != nil && rb.For != "" {
		add(forVerbs, rb.For)
		gr := schema.ParseGroupResource(rb.For)
		add(statusVerbs, schema.GroupResource{Group: gr.Group, Resource: gr.Resource + "/status"}.String())
		for _, o := range rb.Owns {
			add(ownVerbs, o)
		}
		// The controller records the events of its reconcile responses.
		add(emitVerbs, "events")
	}
	for _, ar := range sp.Admission {
		verbs := readVerbs
		if ar.Type == Mutating {
			verbs = mutateVerbs
		}
		for _, r := range ar.Resources {
			add(verbs, r)
		}
	}
	return rules
}

// managedRulesAnnotation holds, on a plugin's ClusterRole, the rules the
// manager last wrote from the spec, so that it tells them from rules an
// administrator added.
const managedRulesAnnotation = "setpoint.dev/plugin-rules"

// ensureRole makes the plugin's ClusterRole and ClusterRoleBinding say what
// its spec asks, owned by the Plugin obj, with the semantics Kubernetes
// gives its default roles: the spec's rules are put back when an
// administrator took one out, and rules an administrator added stay (rules
// an earlier spec asked for and this one does not go); a role or binding
// annotated rbac.authorization.kubernetes.io/autoupdate: "false" is left
// as the administrator made it. Other roles bound to the plugin's user are
// never touched.
func (m *Manager) ensureRole(ctx context.Context, obj *unstructured.Unstructured, sp Spec) error {
	name := obj.GetName()
	owner := []metav1.OwnerReference{{
		APIVersion: Resource.GroupVersion().String(), Kind: Kind, Name: name, UID: obj.GetUID(),
		BlockOwnerDeletion: ptr.To(false),
	}}
	meta := metav1.ObjectMeta{Name: RoleName(name), Labels: map[string]string{"setpoint.dev/plugin": name}, OwnerReferences: owner}
	rules := sp.PolicyRules()
	if rules == nil {
		rules = []rbacv1.PolicyRule{}
	}
	managed, err := json.Marshal(rules)
	if err != nil {
		return err
	}
	roleMeta := *meta.DeepCopy()
	roleMeta.Annotations = map[string]string{managedRulesAnnotation: string(managed)}
	role := rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: roleMeta,
	}
	binding := rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RoleName(name)},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: PluginUser(name).GetName()}},
	}
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		v   any
	}{
		{rbacv1.SchemeGroupVersion.WithResource("clusterroles"), &role},
		{rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), &binding},
	} {
		cur, err := m.opts.Service.Get(ctx, o.gvr, "", RoleName(name), metav1.GetOptions{})
		switch {
		case err == nil && cur.GetAnnotations()[rbacv1.AutoUpdateAnnotationKey] == "false":
			continue
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("plugins: %s of plugin %s: %w", o.gvr.Resource, name, err)
		}
		if r, ok := o.v.(*rbacv1.ClusterRole); ok {
			r.Rules = append(slices.Clone(rules), addedRules(cur, rules)...)
			// The rules kept are those of the role as read: applied
			// under its resourceVersion, an administrator's edit since
			// is a conflict (the reconcile is retried), not lost.
			if cur != nil {
				r.ResourceVersion = cur.GetResourceVersion()
			}
		}
		data, err := json.Marshal(o.v)
		if err != nil {
			return err
		}
		if _, _, err := m.opts.Service.Apply(ctx, o.gvr, "", RoleName(name), data,
			metav1.PatchOptions{FieldManager: roleFieldManager, Force: ptr.To(true)}); err != nil {
			return fmt.Errorf("plugins: %s of plugin %s: %w", o.gvr.Resource, name, err)
		}
	}
	return nil
}

// addedRules are the rules of the stored ClusterRole cur (nil when there
// is none) that an administrator added: those neither the manager wrote
// last (managedRulesAnnotation) nor in want. A role without the annotation
// holds the manager's rules only.
func addedRules(cur *unstructured.Unstructured, want []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	if cur == nil {
		return nil
	}
	last, ok := cur.GetAnnotations()[managedRulesAnnotation]
	if !ok {
		return nil
	}
	var managed []rbacv1.PolicyRule
	if err := json.Unmarshal([]byte(last), &managed); err != nil {
		return nil
	}
	var role rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.Object, &role); err != nil {
		return nil
	}
	var added []rbacv1.PolicyRule
	has := func(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
		return slices.ContainsFunc(rules, func(o rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(o, r) })
	}
	for _, r := range role.Rules {
		if !has(managed, r) && !has(want, r) && !has(added, r) {
			added = append(added, r)
		}
	}
	return added
}

// RuleResolver tells which RBAC rules a user holds cluster-wide (the RBAC
// authorizer implements it).
type RuleResolver interface {
	PolicyRules(ctx context.Context, u user.Info, namespace string) ([]rbacv1.PolicyRule, error)
}

// CheckInstallers makes the admission chain refuse a Plugin whose
// permissions its writer does not hold (see checkInstaller).
func (a *Admitter) CheckInstallers(r RuleResolver) { a.installers.Store(&r) }

// checkInstaller refuses the creation of a Plugin, or a change of its spec,
// by a user who does not hold every permission the spec asks for: no one
// gains permissions through a plugin. The group system:masters and the
// server itself (no user) pass, as in RBAC's escalation checks.
func (a *Admitter) checkInstaller(ctx context.Context, req *engine.AdmissionRequest) error {
	rp := a.installers.Load()
	if rp == nil || req.Resource.GroupResource() != Resource.GroupResource() || req.Subresource != "" || req.Object == nil ||
		(req.Operation != engine.OpCreate && req.Operation != engine.OpUpdate) {
		return nil
	}
	u := req.User
	if u == nil || slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return nil
	}
	sp, err := specOf(req.Object)
	if err != nil {
		return nil // the spec is refused on its own
	}
	if req.OldObject != nil {
		if old, err := specOf(req.OldObject); err == nil && equality.Semantic.DeepEqual(old, sp) {
			return nil
		}
	}
	held, resolveErr := (*rp).PolicyRules(ctx, u, "")
	covers, missing := validation.Covers(held, sp.PolicyRules())
	if covers {
		return nil
	}
	var lines []string
	for _, r := range missing {
		lines = append(lines, fmt.Sprintf("{APIGroups:%q, Resources:%q, Verbs:%q}", r.APIGroups, r.Resources, r.Verbs))
	}
	slices.Sort(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to install a plugin with permissions not currently held:\n%s",
		u.GetName(), u.GetGroups(), strings.Join(slices.Compact(lines), "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: %v", resolveErr)
	}
	return apierrors.NewForbidden(Resource.GroupResource(), req.Name, fmt.Errorf("%s", msg))
}
