package rbac

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// RuleAllows reports whether rule allows the request attrs, as Kubernetes'
// RBAC authorizer decides it. A resource request needs the verb, the API
// group, the resource (with its subresource as "resource/subresource") and,
// when the rule names some, the object's name among its resourceNames; a
// non-resource request needs the verb and the path among its
// nonResourceURLs.
func RuleAllows(attrs authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if attrs.IsResourceRequest() {
		resource := attrs.GetResource()
		sub := attrs.GetSubresource()
		if sub != "" {
			resource += "/" + sub
		}
		return verbMatches(rule, attrs.GetVerb()) &&
			apiGroupMatches(rule, attrs.GetAPIGroup()) &&
			resourceMatches(rule, resource, sub) &&
			resourceNameMatches(rule, attrs.GetName())
	}
	return verbMatches(rule, attrs.GetVerb()) && nonResourceURLMatches(rule, attrs.GetPath())
}

func verbMatches(rule *rbacv1.PolicyRule, verb string) bool {
	for _, v := range rule.Verbs {
		if v == rbacv1.VerbAll || v == verb {
			return true
		}
	}
	return false
}

func apiGroupMatches(rule *rbacv1.PolicyRule, group string) bool {
	for _, g := range rule.APIGroups {
		if g == rbacv1.APIGroupAll || g == group {
			return true
		}
	}
	return false
}

// resourceMatches matches "*", the combined "resource/subresource" (or the
// resource of a request without subresource), and "*/subresource".
func resourceMatches(rule *rbacv1.PolicyRule, combined, sub string) bool {
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll || r == combined {
			return true
		}
		if sub != "" && len(r) == len(sub)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, sub) {
			return true
		}
	}
	return false
}

// resourceNameMatches allows any name when the rule names none.
func resourceNameMatches(rule *rbacv1.PolicyRule, name string) bool {
	if len(rule.ResourceNames) == 0 {
		return true
	}
	for _, n := range rule.ResourceNames {
		if n == name {
			return true
		}
	}
	return false
}

// nonResourceURLMatches matches "*", the path itself, and a prefix ending
// in "*".
func nonResourceURLMatches(rule *rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")) {
			return true
		}
	}
	return false
}
