package rbac

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Authorizer decides requests by the RBAC objects the engine holds, as
// Kubernetes' RBAC authorizer does: Allow when a rule bound to the user
// allows the request, NoOpinion otherwise (there is no Deny in RBAC). It
// also resolves the rules a user's bindings grant (RulesFor, for
// SelfSubjectRulesReview) and the rules a user holds (PolicyRules, for the
// escalation checks).
//
// The group system:masters is allowed everything, whatever the bindings say,
// as kube-apiserver's privileged-group authorizer allows it; its rules
// review lists only what its bindings grant, as kube-apiserver's does.
//
// Until Run has loaded every RBAC object, decisions wait for it (or for
// their context to end): no decision is made from a partial cache.
type Authorizer struct {
	log *slog.Logger
	idx *index
	// synced is closed, once, when the informers have loaded every object.
	synced     chan struct{}
	syncedOnce sync.Once
	// aggregate is signalled when a ClusterRole changes (aggregation).
	aggregate chan struct{}
}

var (
	_ authorizer.Authorizer   = (*Authorizer)(nil)
	_ authorizer.RuleResolver = (*Authorizer)(nil)
)

// Options configures an Authorizer. Zero values get defaults.
type Options struct {
	// Logger gets the informers' and the aggregation's logs; slog.Default()
	// when nil.
	Logger *slog.Logger
}

// New returns an Authorizer with an empty cache; Run fills it.
func New(opts Options) *Authorizer {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Authorizer{
		log:       opts.Logger,
		idx:       newIndex(),
		synced:    make(chan struct{}),
		aggregate: make(chan struct{}, 1),
	}
}

// WaitSynced waits until the cache holds every RBAC object, or ctx ends.
func (a *Authorizer) WaitSynced(ctx context.Context) error {
	// Loaded: the common case, decided without asking ctx for its Done
	// channel (which a request's context makes on first use).
	select {
	case <-a.synced:
		return nil
	default:
	}
	select {
	case <-a.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rbac: wait for the cache: %w", context.Cause(ctx))
	}
}

// Authorize implements authorizer.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	u := attrs.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "", nil
	}
	if err := a.WaitSynced(ctx); err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	var (
		allowed *grant
		errs    []error
	)
	a.idx.mu.RLock()
	a.idx.visitLocked(u.GetName(), u.GetGroups(), attrs.GetNamespace(), func(g *grant, rules []rbacv1.PolicyRule, found bool) bool {
		if !found {
			errs = append(errs, missingRole(g))
			return true
		}
		for i := range rules {
			if RuleAllows(attrs, &rules[i]) {
				allowed = g
				return false
			}
		}
		return true
	})
	a.idx.mu.RUnlock()
	if allowed != nil {
		return authorizer.DecisionAllow, allowReason(allowed), nil
	}
	reason := ""
	if len(errs) > 0 {
		reason = fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs))
	}
	return authorizer.DecisionNoOpinion, reason, nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: RBAC decisions
// are unconditional.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: RBAC has no
// conditions to evaluate.
func (a *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// allowReason says which binding allowed a request, in the words of
// Kubernetes' RBAC authorizer (namespaced names as name/namespace).
func allowReason(g *grant) string {
	name := g.name
	if g.ns != "" {
		name += "/" + g.ns
	}
	subject := g.subject.Name
	if g.subject.Kind == rbacv1.ServiceAccountKind {
		ns := g.subject.Namespace
		if ns == "" {
			ns = g.ns
		}
		subject += "/" + ns
	}
	// Every allowed request gets one: concatenated rather than formatted.
	return "RBAC: allowed by " + g.kind + " " + strconv.Quote(name) + " of " + g.roleRef.Kind + " " + strconv.Quote(g.roleRef.Name) +
		" to " + g.subject.Kind + " " + strconv.Quote(subject)
}

func missingRole(g *grant) error {
	if g.roleRef.Kind == "Role" {
		return fmt.Errorf("role.rbac.authorization.k8s.io %q not found in namespace %q", g.roleRef.Name, g.ns)
	}
	return fmt.Errorf("clusterrole.rbac.authorization.k8s.io %q not found", g.roleRef.Name)
}

// PolicyRules returns the rules u holds in namespace ns: those of its
// ClusterRoleBindings and, when ns is set, of its RoleBindings there. A
// binding to a missing role adds an error, and the rules found are still
// returned. The group system:masters holds every rule.
func (a *Authorizer) PolicyRules(ctx context.Context, u user.Info, ns string) ([]rbacv1.PolicyRule, error) {
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return slices.Clone(fullAuthority), nil
	}
	return a.boundRules(ctx, u, ns)
}

// boundRules returns the rules of the bindings of u, as PolicyRules, for
// every user: system:masters holds what its bindings (cluster-admin's by
// default) grant.
func (a *Authorizer) boundRules(ctx context.Context, u user.Info, ns string) ([]rbacv1.PolicyRule, error) {
	if err := a.WaitSynced(ctx); err != nil {
		return nil, err
	}
	var (
		rules []rbacv1.PolicyRule
		errs  []error
	)
	seen := map[string]bool{}
	a.idx.mu.RLock()
	a.idx.visitLocked(u.GetName(), u.GetGroups(), ns, func(g *grant, rs []rbacv1.PolicyRule, found bool) bool {
		key := g.kind + "/" + g.ns + "/" + g.name
		if seen[key] {
			return true
		}
		seen[key] = true
		if !found {
			errs = append(errs, missingRole(g))
			return true
		}
		for _, r := range rs {
			rules = append(rules, *r.DeepCopy())
		}
		return true
	})
	a.idx.mu.RUnlock()
	return rules, utilerrors.NewAggregate(errs)
}

// RoleRules returns the rules of the role ref names, for a binding in
// namespace ns (a Role is looked up there), or an error when it does not
// exist.
func (a *Authorizer) RoleRules(ctx context.Context, ref rbacv1.RoleRef, ns string) ([]rbacv1.PolicyRule, error) {
	if err := a.WaitSynced(ctx); err != nil {
		return nil, err
	}
	a.idx.mu.RLock()
	defer a.idx.mu.RUnlock()
	rules, ok := a.idx.rulesOfLocked(ref, ns)
	if !ok {
		return nil, missingRole(&grant{roleRef: ref, ns: ns})
	}
	out := make([]rbacv1.PolicyRule, len(rules))
	for i := range rules {
		out[i] = *rules[i].DeepCopy()
	}
	return out, nil
}

// RulesFor implements authorizer.RuleResolver: the rules of u's bindings,
// as resource and non-resource rule infos. As kube-apiserver's RBAC rule
// resolver, it lists for system:masters the rules it is bound to, not the
// authority the group has besides them (PolicyRules).
func (a *Authorizer) RulesFor(ctx context.Context, u user.Info, ns string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	rules, err := a.boundRules(ctx, u, ns)
	var (
		res    []authorizer.ResourceRuleInfo
		nonRes []authorizer.NonResourceRuleInfo
	)
	for _, r := range rules {
		if len(r.Resources) > 0 {
			res = append(res, &authorizer.DefaultResourceRuleInfo{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
		}
		if len(r.NonResourceURLs) > 0 {
			nonRes = append(nonRes, &authorizer.DefaultNonResourceRuleInfo{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
		}
	}
	return res, nonRes, false, err
}

// fullAuthority is every permission: what cluster-admin grants.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}
