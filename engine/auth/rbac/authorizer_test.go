package rbac

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// loaded returns an Authorizer whose cache holds objs, as if Run had
// loaded them.
func loaded(objs ...any) *Authorizer {
	a := New(Options{})
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.Role:
			a.idx.putRole(o)
		case *rbacv1.ClusterRole:
			a.idx.putClusterRole(o)
		case *rbacv1.RoleBinding:
			a.idx.putRoleBinding(o)
		case *rbacv1.ClusterRoleBinding:
			a.idx.putClusterRoleBinding(o)
		}
	}
	a.syncedOnce.Do(func() { close(a.synced) })
	return a
}

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func saSubject(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

func roleBinding(ns, name, refKind, ref string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: refKind, Name: ref},
		Subjects:   subjects,
	}
}

func clusterRoleBinding(name, ref string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ref},
		Subjects:   subjects,
	}
}

func who(name string, groups ...string) user.Info {
	return &user.DefaultInfo{Name: name, Groups: groups}
}

func nsReq(u user.Info, verb, group, resource, ns, name string) authorizer.AttributesRecord {
	r := resourceReq(verb, group, resource, "", name)
	r.User, r.Namespace = u, ns
	return r
}

// TestAuthorize checks whose bindings grant what, where, as Kubernetes'
// RBAC authorizer decides.
func TestAuthorize(t *testing.T) {
	readWidgets := rule(read, "example.setpoint.dev", "widgets")
	a := loaded(
		clusterRole("widget-reader", readWidgets),
		clusterRole("metrics", urls([]string{"get"}, "/metrics")),
		role("team-a", "widget-writer", rule([]string{"create", "update"}, "example.setpoint.dev", "widgets")),
		role("team-b", "widget-writer", rule([]string{"*"}, "*", "*")),
		clusterRoleBinding("readers", "widget-reader", userSubject("ann"), groupSubject("readers")),
		clusterRoleBinding("metrics", "metrics", userSubject("prom")),
		roleBinding("team-a", "writers", "Role", "widget-writer", userSubject("bob"), saSubject("", "deployer")),
		roleBinding("team-a", "local-readers", "ClusterRole", "widget-reader", userSubject("carl")),
		clusterRoleBinding("sa", "widget-reader", saSubject("ops", "robot"), saSubject("", "nowhere")),
		roleBinding("team-a", "ghost", "Role", "missing", userSubject("dan")),
	)
	sa := func(ns, name string) user.Info {
		return who(serviceaccount.MakeUsername(ns, name), serviceaccount.AllServiceAccountsGroup, serviceaccount.MakeNamespaceGroupName(ns), user.AllAuthenticated)
	}
	tests := []struct {
		name       string
		req        authorizer.AttributesRecord
		want       authorizer.Decision
		wantReason string
	}{
		{"user of a ClusterRoleBinding, any namespace", nsReq(who("ann"), "list", "example.setpoint.dev", "widgets", "team-b", ""), authorizer.DecisionAllow,
			`RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "widget-reader" to User "ann"`},
		{"user of a ClusterRoleBinding, cluster-wide", nsReq(who("ann"), "watch", "example.setpoint.dev", "widgets", "", ""), authorizer.DecisionAllow, ""},
		{"verb the role lacks", nsReq(who("ann"), "delete", "example.setpoint.dev", "widgets", "team-a", "w"), authorizer.DecisionNoOpinion, ""},
		{"group of a ClusterRoleBinding", nsReq(who("zed", "readers"), "get", "example.setpoint.dev", "widgets", "x", "w"), authorizer.DecisionAllow,
			`to Group "readers"`},
		{"no binding", nsReq(who("zed", "others"), "get", "example.setpoint.dev", "widgets", "x", "w"), authorizer.DecisionNoOpinion, ""},
		{"user of a RoleBinding, its namespace", nsReq(who("bob"), "create", "example.setpoint.dev", "widgets", "team-a", ""), authorizer.DecisionAllow,
			`RBAC: allowed by RoleBinding "writers/team-a" of Role "widget-writer" to User "bob"`},
		{"user of a RoleBinding, other namespace", nsReq(who("bob"), "create", "example.setpoint.dev", "widgets", "team-b", ""), authorizer.DecisionNoOpinion, ""},
		{"user of a RoleBinding, cluster-wide", nsReq(who("bob"), "create", "example.setpoint.dev", "widgets", "", ""), authorizer.DecisionNoOpinion, ""},
		{"RoleBinding to a ClusterRole grants in its namespace", nsReq(who("carl"), "get", "example.setpoint.dev", "widgets", "team-a", "w"), authorizer.DecisionAllow, ""},
		{"RoleBinding to a ClusterRole, other namespace", nsReq(who("carl"), "get", "example.setpoint.dev", "widgets", "team-b", "w"), authorizer.DecisionNoOpinion, ""},
		{"ServiceAccount of a ClusterRoleBinding", nsReq(sa("ops", "robot"), "get", "example.setpoint.dev", "widgets", "x", "w"), authorizer.DecisionAllow, `to ServiceAccount "robot/ops"`},
		{"same name, other namespace", nsReq(sa("dev", "robot"), "get", "example.setpoint.dev", "widgets", "x", "w"), authorizer.DecisionNoOpinion, ""},
		{"ServiceAccount of a RoleBinding, namespace defaulted", nsReq(sa("team-a", "deployer"), "update", "example.setpoint.dev", "widgets", "team-a", "w"), authorizer.DecisionAllow,
			`to ServiceAccount "deployer/team-a"`},
		{"a user named like no ServiceAccount", nsReq(who("deployer"), "update", "example.setpoint.dev", "widgets", "team-a", "w"), authorizer.DecisionNoOpinion, ""},
		{"missing role", nsReq(who("dan"), "get", "example.setpoint.dev", "widgets", "team-a", "w"), authorizer.DecisionNoOpinion,
			`RBAC: role.rbac.authorization.k8s.io "missing" not found`},
		{"non-resource URL", authorizer.AttributesRecord{User: who("prom"), Verb: "get", Path: "/metrics"}, authorizer.DecisionAllow, ""},
		{"non-resource URL, other verb", authorizer.AttributesRecord{User: who("prom"), Verb: "post", Path: "/metrics"}, authorizer.DecisionNoOpinion, ""},
		{"system:masters", nsReq(who("root", user.SystemPrivilegedGroup), "delete", "", "namespaces", "", "x"), authorizer.DecisionAllow, ""},
		{"no user", authorizer.AttributesRecord{Verb: "get", Path: "/metrics"}, authorizer.DecisionNoOpinion, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, reason, err := a.Authorize(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if d != tt.want {
				t.Fatalf("decision %v (%s), want %v", d, reason, tt.want)
			}
			if !strings.Contains(reason, tt.wantReason) {
				t.Errorf("reason %q, want it to contain %q", reason, tt.wantReason)
			}
		})
	}
}

// TestAuthorizeWaitsForCache checks that no decision is made before the
// cache is loaded.
func TestAuthorizeWaitsForCache(t *testing.T) {
	a := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, _, err := a.Authorize(ctx, nsReq(who("ann"), "get", "", "pods", "x", ""))
	if d == authorizer.DecisionAllow || err == nil {
		t.Fatalf("decision %v, err %v before the cache loaded", d, err)
	}
}

// TestIndexUpdates checks that replacing and deleting bindings and roles
// takes back what they granted.
func TestIndexUpdates(t *testing.T) {
	a := loaded(clusterRole("r", rule(read, "", "namespaces")), role("ns", "r", rule(read, "", "events")))
	ctx := context.Background()
	check := func(u user.Info, resource, ns string, want authorizer.Decision) {
		t.Helper()
		if d, reason, _ := a.Authorize(ctx, nsReq(u, "get", "", resource, ns, "x")); d != want {
			t.Fatalf("%s get %s in %q: %v (%s), want %v", u.GetName(), resource, ns, d, reason, want)
		}
	}
	a.idx.putClusterRoleBinding(clusterRoleBinding("b", "r", userSubject("ann")))
	a.idx.putRoleBinding(roleBinding("ns", "b", "Role", "r", userSubject("bob")))
	check(who("ann"), "namespaces", "", authorizer.DecisionAllow)
	check(who("bob"), "events", "ns", authorizer.DecisionAllow)
	// New subjects replace the old ones.
	a.idx.putClusterRoleBinding(clusterRoleBinding("b", "r", userSubject("carl")))
	a.idx.putRoleBinding(roleBinding("ns", "b", "Role", "r", groupSubject("g")))
	check(who("ann"), "namespaces", "", authorizer.DecisionNoOpinion)
	check(who("carl"), "namespaces", "", authorizer.DecisionAllow)
	check(who("bob"), "events", "ns", authorizer.DecisionNoOpinion)
	check(who("x", "g"), "events", "ns", authorizer.DecisionAllow)
	// A role's new rules apply at once.
	a.idx.putClusterRole(clusterRole("r", rule(read, "", "events")))
	check(who("carl"), "namespaces", "", authorizer.DecisionNoOpinion)
	check(who("carl"), "events", "", authorizer.DecisionAllow)
	// Deletes take everything back.
	a.idx.deleteRole("ns", "r")
	check(who("x", "g"), "events", "ns", authorizer.DecisionNoOpinion)
	a.idx.deleteClusterRoleBinding("b")
	a.idx.deleteRoleBinding("ns", "b")
	check(who("carl"), "events", "", authorizer.DecisionNoOpinion)
	if len(a.idx.crbBySubject) != 0 || len(a.idx.rbBySubject) != 0 || len(a.idx.crbs) != 0 || len(a.idx.rbs) != 0 {
		t.Fatalf("index keeps deleted bindings: %+v %+v", a.idx.crbBySubject, a.idx.rbBySubject)
	}
}

// TestRulesFor checks the rules a user holds, cluster-wide and in a
// namespace.
func TestRulesFor(t *testing.T) {
	a := loaded(
		clusterRole("c", rule(read, "", "namespaces"), urls([]string{"get"}, "/healthz")),
		role("ns", "r", rule([]string{"create"}, "", "events")),
		clusterRoleBinding("c", "c", userSubject("ann"), groupSubject("g")),
		roleBinding("ns", "r", "Role", "r", userSubject("ann")),
		roleBinding("ns", "gone", "ClusterRole", "gone", userSubject("ann")),
	)
	ctx := context.Background()
	res, nonRes, incomplete, err := a.RulesFor(ctx, who("ann", "g"), "ns")
	if incomplete {
		t.Error("incomplete")
	}
	if err == nil || !strings.Contains(err.Error(), `clusterrole.rbac.authorization.k8s.io "gone" not found`) {
		t.Errorf("err %v, want the missing ClusterRole", err)
	}
	// The ClusterRoleBinding names ann twice (user and group): its rules
	// come once.
	if len(res) != 2 || len(nonRes) != 1 {
		t.Fatalf("rules %d resource, %d non-resource; want 2 and 1", len(res), len(nonRes))
	}
	if res, _, _, _ := a.RulesFor(ctx, who("ann"), "other"); len(res) != 1 {
		t.Errorf("in another namespace: %d resource rules, want 1", len(res))
	}
	rules, err := a.PolicyRules(ctx, who("root", user.SystemPrivilegedGroup), "")
	if err != nil || len(rules) != 2 || rules[0].Verbs[0] != "*" {
		t.Errorf("system:masters holds %v (%v), want every permission", rules, err)
	}
	// The rules review lists, for system:masters as for anyone, the rules
	// of its bindings (here those of group g), as kube-apiserver does.
	res, nonRes, _, err = a.RulesFor(ctx, who("root", user.SystemPrivilegedGroup, "g"), "")
	if err != nil || len(res) != 1 || res[0].GetResources()[0] != "namespaces" || len(nonRes) != 1 || nonRes[0].GetNonResourceURLs()[0] != "/healthz" {
		t.Errorf("rules of a member of system:masters and g: %v %v (%v), want those of g's binding", res, nonRes, err)
	}
}
