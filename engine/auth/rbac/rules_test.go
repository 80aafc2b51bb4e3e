package rbac

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// resourceReq is a resource request: verb group resource[/sub] name.
func resourceReq(verb, group, resource, sub, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Name: name, ResourceRequest: true}
}

func pathReq(verb, path string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{Verb: verb, Path: path}
}

// TestRuleAllows checks rule evaluation against Kubernetes' semantics (the
// cases of its RBAC authorizer's and evaluation helpers' tests, re-expressed).
func TestRuleAllows(t *testing.T) {
	tests := []struct {
		name string
		rule rbacv1.PolicyRule
		req  authorizer.AttributesRecord
		want bool
	}{
		{"exact", rule([]string{"get"}, "", "pods"), resourceReq("get", "", "pods", "", "p"), true},
		{"other verb", rule([]string{"get"}, "", "pods"), resourceReq("list", "", "pods", "", ""), false},
		{"star verb", rule([]string{"*"}, "", "pods"), resourceReq("deletecollection", "", "pods", "", ""), true},
		{"other group", rule([]string{"get"}, "", "pods"), resourceReq("get", "apps", "pods", "", ""), false},
		{"star group", rule([]string{"get"}, "*", "pods"), resourceReq("get", "example.setpoint.dev", "pods", "", ""), true},
		{"star resource", rule([]string{"get"}, "", "*"), resourceReq("get", "", "secrets", "", ""), true},
		{"star resource covers subresources", rule([]string{"get"}, "", "*"), resourceReq("get", "", "pods", "status", ""), true},
		{"resource does not cover its subresources", rule([]string{"get"}, "", "widgets"), resourceReq("get", "", "widgets", "status", ""), false},
		{"subresource", rule([]string{"update"}, "", "widgets/status"), resourceReq("update", "", "widgets", "status", "w"), true},
		{"subresource does not cover the resource", rule([]string{"update"}, "", "widgets/status"), resourceReq("update", "", "widgets", "", "w"), false},
		{"star subresource", rule([]string{"update"}, "", "*/scale"), resourceReq("update", "", "widgets", "scale", ""), true},
		{"star subresource, other subresource", rule([]string{"update"}, "", "*/scale"), resourceReq("update", "", "widgets", "status", ""), false},
		{"star subresource, no subresource", rule([]string{"update"}, "", "*/scale"), resourceReq("update", "", "widgets", "", ""), false},
		{"star subresource, longer name", rule([]string{"update"}, "", "*/scale"), resourceReq("update", "", "widgets", "xscale", ""), false},
		{"resource star is not a prefix", rule([]string{"get"}, "", "widgets/*"), resourceReq("get", "", "widgets", "status", ""), false},
		{"resourceNames match", withNames(rule([]string{"get"}, "", "pods"), "a", "b"), resourceReq("get", "", "pods", "", "b"), true},
		{"resourceNames other name", withNames(rule([]string{"get"}, "", "pods"), "a"), resourceReq("get", "", "pods", "", "c"), false},
		{"resourceNames and no name (list)", withNames(rule([]string{"list"}, "", "pods"), "a"), resourceReq("list", "", "pods", "", ""), false},
		{"resource rule on a path", rule([]string{"get"}, "*", "*"), pathReq("get", "/metrics"), false},
		{"url exact", urls([]string{"get"}, "/metrics"), pathReq("get", "/metrics"), true},
		{"url other verb", urls([]string{"get"}, "/metrics"), pathReq("post", "/metrics"), false},
		{"url star", urls([]string{"*"}, "*"), pathReq("delete", "/anything/at/all"), true},
		{"url prefix", urls([]string{"get"}, "/apis/*"), pathReq("get", "/apis/apps/v1"), true},
		{"url prefix, its root with slash", urls([]string{"get"}, "/apis/*"), pathReq("get", "/apis/"), true},
		{"url prefix, its root without slash", urls([]string{"get"}, "/apis/*"), pathReq("get", "/apis"), false},
		{"url prefix without slash", urls([]string{"get"}, "/debug/pprof*"), pathReq("get", "/debug/pprofx"), true},
		{"url is not a prefix", urls([]string{"get"}, "/metrics"), pathReq("get", "/metrics/x"), false},
		{"url rule on a resource", urls([]string{"*"}, "*"), resourceReq("get", "", "pods", "", ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RuleAllows(tt.req, &tt.rule); got != tt.want {
				t.Errorf("RuleAllows(%+v, %+v) = %v, want %v", tt.req, tt.rule, got, tt.want)
			}
		})
	}
}

func withNames(r rbacv1.PolicyRule, names ...string) rbacv1.PolicyRule {
	r.ResourceNames = names
	return r
}
