package rbac

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// aggregationFieldManager is the field manager of the aggregation's writes,
// kube-controller-manager's name for it.
const aggregationFieldManager = "clusterrole-aggregation-controller"

// aggregationRetry is how long the aggregation waits before retrying a
// failed write.
const aggregationRetry = time.Second

// runAggregation fills the rules of every ClusterRole with an
// aggregationRule whenever a ClusterRole changes, as Kubernetes'
// clusterrole-aggregation controller does: the rules of the ClusterRoles
// its selectors match (itself excepted), in name order per selector, each
// rule once. It returns when ctx is done.
func (a *Authorizer) runAggregation(ctx context.Context, c Client) {
	retry := time.NewTimer(0)
	<-retry.C
	for {
		select {
		case <-ctx.Done():
			retry.Stop()
			return
		case <-a.aggregate:
		case <-retry.C:
		}
		if !a.aggregateOnce(ctx, c) && ctx.Err() == nil {
			retry.Reset(aggregationRetry)
		}
	}
}

// aggregateOnce writes every aggregated ClusterRole whose rules differ from
// what its selectors gather, and reports whether every write succeeded.
func (a *Authorizer) aggregateOnce(ctx context.Context, c Client) bool {
	ok := true
	for name, rules := range a.aggregatedRules() {
		if err := writeRules(ctx, c, name, rules); err != nil {
			if ctx.Err() == nil {
				a.log.Warn("aggregate clusterrole", "name", name, "err", err)
			}
			ok = false
		}
	}
	return ok
}

// aggregatedRules returns, for each aggregated ClusterRole whose rules are
// not what its selectors gather, the rules they gather.
func (a *Authorizer) aggregatedRules() map[string][]rbacv1.PolicyRule {
	a.idx.mu.RLock()
	defer a.idx.mu.RUnlock()
	roles := make([]*rbacv1.ClusterRole, 0, len(a.idx.clusterRoles))
	for _, r := range a.idx.clusterRoles {
		roles = append(roles, r)
	}
	slices.SortFunc(roles, func(x, y *rbacv1.ClusterRole) int { return strings.Compare(x.Name, y.Name) })
	out := map[string][]rbacv1.PolicyRule{}
	for _, r := range roles {
		if r.AggregationRule == nil {
			continue
		}
		rules, err := gather(r, roles)
		if err != nil {
			a.log.Warn("aggregate clusterrole", "name", r.Name, "err", err)
			continue
		}
		if !equality.Semantic.DeepEqual(rules, r.Rules) {
			out[r.Name] = rules
		}
	}
	return out
}

// gather returns the rules the aggregationRule of r gathers from roles
// (sorted by name).
func gather(r *rbacv1.ClusterRole, roles []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	rules := []rbacv1.PolicyRule{}
	for i := range r.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&r.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, err
		}
		for _, other := range roles {
			if other.Name == r.Name || !sel.Matches(labels.Set(other.Labels)) {
				continue
			}
			for _, rule := range other.Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return reflect.DeepEqual(have, rule) }) {
					rules = append(rules, *rule.DeepCopy())
				}
			}
		}
	}
	return rules, nil
}

// writeRules sets the rules of the ClusterRole name, unless it is gone or
// already has them.
func writeRules(ctx context.Context, c Client, name string, rules []rbacv1.PolicyRule) error {
	cur, err := c.Get(ctx, kinds.ClusterRoleResource, "", name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var have rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.Object, &have); err != nil {
		return err
	}
	if have.AggregationRule == nil || equality.Semantic.DeepEqual(have.Rules, rules) {
		return nil
	}
	list := make([]any, 0, len(rules))
	for i := range rules {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rules[i])
		if err != nil {
			return err
		}
		list = append(list, m)
	}
	cur.Object["rules"] = list
	// Read from the store and given rules encoded from their Go type, the
	// ClusterRole is in the shape its kind stores.
	_, err = c.Update(kinds.WithBuiltShape(ctx), kinds.ClusterRoleResource, cur, metav1.UpdateOptions{FieldManager: aggregationFieldManager})
	return err
}
