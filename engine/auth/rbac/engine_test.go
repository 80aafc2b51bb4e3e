package rbac

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// served is an engine on a real Badger store with the authorizer following
// it and the escalation checks as its admission.
type served struct {
	svc *engine.Service
	a   *Authorizer
}

// serve starts it, with namespaces a, b and team.
func serve(t testing.TB) *served {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := New(Options{Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: log, Admitter: NewEscalation(a)})
	if err != nil {
		cancel()
		db.Close()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		svc.Close()
		db.Close()
	})
	wg.Go(func() { _ = svc.Run(ctx) })
	if err := EnsureDefaults(ctx, svc); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "team"} {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(name)
		if _, err := svc.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Go(func() { _ = a.Run(ctx, svc) })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := a.WaitSynced(wctx); err != nil {
		t.Fatal(err)
	}
	return &served{svc: svc, a: a}
}

// eventually waits up to 10 s for cond.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func toU(t testing.TB, kind string, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("rbac.authorization.k8s.io/v1")
	u.SetKind(kind)
	return u
}

func gvrOf(kind string) schema.GroupVersionResource {
	switch kind {
	case "Role":
		return kinds.RoleResource
	case "ClusterRole":
		return kinds.ClusterRoleResource
	case "RoleBinding":
		return kinds.RoleBindingResource
	}
	return kinds.ClusterRoleBindingResource
}

func kindOf(obj runtime.Object) string {
	switch obj.(type) {
	case *rbacv1.Role:
		return "Role"
	case *rbacv1.ClusterRole:
		return "ClusterRole"
	case *rbacv1.RoleBinding:
		return "RoleBinding"
	}
	return "ClusterRoleBinding"
}

// create writes obj as u (the server itself when u is nil).
func (s *served) create(t testing.TB, u user.Info, obj runtime.Object) error {
	t.Helper()
	ctx := context.Background()
	if u != nil {
		ctx = request.WithUser(ctx, u)
	}
	kind := kindOf(obj)
	_, err := s.svc.Create(ctx, gvrOf(kind), toU(t, kind, obj), metav1.CreateOptions{})
	return err
}

func (s *served) mustCreate(t testing.TB, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		if err := s.create(t, nil, o); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *served) decide(u user.Info, attrs authorizer.AttributesRecord) authorizer.Decision {
	attrs.User = u
	d, _, _ := s.a.Authorize(context.Background(), attrs)
	return d
}

// waitDecision waits until the cache has caught up to a decision.
func (s *served) waitDecision(t testing.TB, u user.Info, attrs authorizer.AttributesRecord, want authorizer.Decision) {
	t.Helper()
	eventually(t, "decision "+want.String()+" for "+u.GetName(), func() bool { return s.decide(u, attrs) == want })
}

// TestDefaultRoles checks the default roles and bindings, the aggregation
// of admin, edit and view, and that EnsureDefaults puts back a rule taken
// out of a default role unless it is annotated autoupdate "false".
func TestDefaultRoles(t *testing.T) {
	s := serve(t)
	ctx := context.Background()
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery", "system:public-info-viewer"} {
		if _, err := s.svc.Get(ctx, kinds.ClusterRoleResource, "", name, metav1.GetOptions{}); err != nil {
			t.Errorf("clusterrole %s: %v", name, err)
		}
	}
	for _, name := range []string{"cluster-admin", "system:basic-user", "system:discovery", "system:public-info-viewer"} {
		if _, err := s.svc.Get(ctx, kinds.ClusterRoleBindingResource, "", name, metav1.GetOptions{}); err != nil {
			t.Errorf("clusterrolebinding %s: %v", name, err)
		}
	}
	// Everyone authenticated may discover and review themselves.
	anyone := who("ann", user.AllAuthenticated)
	s.waitDecision(t, anyone, pathReq("get", "/apis/example.setpoint.dev/v1"), authorizer.DecisionAllow)
	s.waitDecision(t, anyone, resourceReq("create", "authorization.k8s.io", "selfsubjectaccessreviews", "", ""), authorizer.DecisionAllow)
	if d := s.decide(anyone, resourceReq("list", "", "namespaces", "", "")); d == authorizer.DecisionAllow {
		t.Error("an authenticated user may list namespaces")
	}
	// admin gathers edit's rules, which gather view's.
	s.mustCreate(t, roleBinding("team", "admins", "ClusterRole", "admin", userSubject("adm")),
		roleBinding("team", "viewers", "ClusterRole", "view", userSubject("viewer")))
	adm, viewer := who("adm"), who("viewer")
	inTeam := func(verb, resource string) authorizer.AttributesRecord {
		r := resourceReq(verb, "", resource, "", "")
		r.Namespace = "team"
		return r
	}
	s.waitDecision(t, adm, inTeam("list", "serviceaccounts"), authorizer.DecisionAllow)
	s.waitDecision(t, adm, inTeam("delete", "serviceaccounts"), authorizer.DecisionAllow)
	rbacReq := resourceReq("create", rbacv1.GroupName, "rolebindings", "", "")
	rbacReq.Namespace = "team"
	s.waitDecision(t, adm, rbacReq, authorizer.DecisionAllow)
	s.waitDecision(t, viewer, inTeam("watch", "events"), authorizer.DecisionAllow)
	if d := s.decide(viewer, inTeam("create", "serviceaccounts")); d == authorizer.DecisionAllow {
		t.Error("view may create serviceaccounts")
	}
	// Custom resources are not in admin, edit or view.
	if d := s.decide(adm, nsReqAttrs("get", "example.setpoint.dev", "widgets", "team")); d == authorizer.DecisionAllow {
		t.Error("admin may read custom resources")
	}

	// A rule taken out comes back; not when autoupdate is "false".
	cur, err := s.svc.Get(ctx, kinds.ClusterRoleResource, "", "system:basic-user", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Object["rules"] = cur.Object["rules"].([]any)[:1]
	if _, err := s.svc.Update(ctx, kinds.ClusterRoleResource, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDefaults(ctx, s.svc); err != nil {
		t.Fatal(err)
	}
	cur, _ = s.svc.Get(ctx, kinds.ClusterRoleResource, "", "system:basic-user", metav1.GetOptions{})
	if n := len(cur.Object["rules"].([]any)); n != 2 {
		t.Fatalf("system:basic-user has %d rules after EnsureDefaults, want 2", n)
	}
	cur.Object["rules"] = cur.Object["rules"].([]any)[:1]
	cur.SetAnnotations(map[string]string{rbacv1.AutoUpdateAnnotationKey: "false"})
	if _, err := s.svc.Update(ctx, kinds.ClusterRoleResource, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDefaults(ctx, s.svc); err != nil {
		t.Fatal(err)
	}
	cur, _ = s.svc.Get(ctx, kinds.ClusterRoleResource, "", "system:basic-user", metav1.GetOptions{})
	if n := len(cur.Object["rules"].([]any)); n != 1 {
		t.Fatalf("system:basic-user annotated autoupdate=false has %d rules after EnsureDefaults, want 1", n)
	}
}

func nsReqAttrs(verb, group, resource, ns string) authorizer.AttributesRecord {
	r := resourceReq(verb, group, resource, "", "")
	r.Namespace = ns
	return r
}

// TestCacheFollowsWrites checks that creates, updates and deletes of the
// RBAC kinds reach decisions.
func TestCacheFollowsWrites(t *testing.T) {
	s := serve(t)
	ctx := context.Background()
	ann := who("ann")
	get := nsReqAttrs("get", "example.setpoint.dev", "widgets", "a")
	s.mustCreate(t, role("a", "reader", rule(read, "example.setpoint.dev", "widgets")),
		roleBinding("a", "readers", "Role", "reader", userSubject("ann")))
	s.waitDecision(t, ann, get, authorizer.DecisionAllow)

	// The binding now names someone else.
	b, err := s.svc.Get(ctx, kinds.RoleBindingResource, "a", "readers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Object["subjects"] = []any{map[string]any{"kind": "User", "apiGroup": rbacv1.GroupName, "name": "bob"}}
	if _, err := s.svc.Update(ctx, kinds.RoleBindingResource, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitDecision(t, ann, get, authorizer.DecisionNoOpinion)
	s.waitDecision(t, who("bob"), get, authorizer.DecisionAllow)

	// The role loses the verb.
	r, _ := s.svc.Get(ctx, kinds.RoleResource, "a", "reader", metav1.GetOptions{})
	r.Object["rules"] = []any{map[string]any{"apiGroups": []any{"example.setpoint.dev"}, "resources": []any{"widgets"}, "verbs": []any{"list"}}}
	if _, err := s.svc.Update(ctx, kinds.RoleResource, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitDecision(t, who("bob"), get, authorizer.DecisionNoOpinion)
	list := nsReqAttrs("list", "example.setpoint.dev", "widgets", "a")
	s.waitDecision(t, who("bob"), list, authorizer.DecisionAllow)

	// Deleting the binding takes it back.
	if err := s.svc.Delete(ctx, kinds.RoleBindingResource, "a", "readers", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitDecision(t, who("bob"), list, authorizer.DecisionNoOpinion)

	// A ClusterRoleBinding grants everywhere, until its role is deleted.
	s.mustCreate(t, clusterRole("lister", rule([]string{"list"}, "example.setpoint.dev", "widgets")),
		clusterRoleBinding("listers", "lister", groupSubject("team")))
	s.waitDecision(t, who("carl", "team"), nsReqAttrs("list", "example.setpoint.dev", "widgets", "z"), authorizer.DecisionAllow)
	if err := s.svc.Delete(ctx, kinds.ClusterRoleResource, "", "lister", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitDecision(t, who("carl", "team"), nsReqAttrs("list", "example.setpoint.dev", "widgets", "z"), authorizer.DecisionNoOpinion)
}

// TestAggregation checks that an aggregated ClusterRole follows the rules
// of the ClusterRoles its selectors match, as they come, change and go.
func TestAggregation(t *testing.T) {
	s := serve(t)
	ctx := context.Background()
	agg := clusterRole("widgets-all")
	agg.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"widgets": "true"}}}}
	s.mustCreate(t, agg)
	part := func(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		r := clusterRole(name, rules...)
		r.Labels = map[string]string{"widgets": "true"}
		return r
	}
	rulesOf := func() []rbacv1.PolicyRule {
		u, err := s.svc.Get(ctx, kinds.ClusterRoleResource, "", "widgets-all", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var r rbacv1.ClusterRole
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r)
		return r.Rules
	}
	readW := rule(read, "example.setpoint.dev", "widgets")
	writeW := rule(write, "example.setpoint.dev", "widgets")
	// The matched roles are taken in name order: a-reader's rule first.
	s.mustCreate(t, part("b-writer", writeW), part("a-reader", readW), clusterRole("unlabelled", rule([]string{"*"}, "*", "*")))
	eventually(t, "two aggregated rules", func() bool {
		r := rulesOf()
		return len(r) == 2 && r[0].Verbs[0] == "get" && r[1].Verbs[0] == "create"
	})
	// The same rule twice is aggregated once.
	s.mustCreate(t, part("c-dup", readW))
	if err := s.svc.Delete(ctx, kinds.ClusterRoleResource, "", "b-writer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "one aggregated rule", func() bool { return len(rulesOf()) == 1 })
	// The aggregated rules grant.
	s.mustCreate(t, clusterRoleBinding("w", "widgets-all", userSubject("ann")))
	s.waitDecision(t, who("ann"), nsReqAttrs("watch", "example.setpoint.dev", "widgets", "x"), authorizer.DecisionAllow)
}

// TestEscalation checks that users cannot grant what they do not hold,
// unless they may escalate or bind, as Kubernetes refuses it.
func TestEscalation(t *testing.T) {
	s := serve(t)
	// alice administers namespace "a": widgets and RBAC there.
	s.mustCreate(t,
		role("a", "alice", rule(readWrite, "example.setpoint.dev", "widgets"), rule(readWrite, rbacv1.GroupName, "roles", "rolebindings")),
		roleBinding("a", "alice", "Role", "alice", userSubject("alice")),
		clusterRole("widget-reader", rule(read, "example.setpoint.dev", "widgets")),
		clusterRole("secret-reader", rule(read, "", "secrets")),
	)
	alice := who("alice", user.AllAuthenticated)
	s.waitDecision(t, alice, nsReqAttrs("create", rbacv1.GroupName, "roles", "a"), authorizer.DecisionAllow)
	// The binding checks below read the ClusterRoles from the authorizer's
	// cache, which follows the writes a moment later.
	for _, name := range []string{"widget-reader", "secret-reader"} {
		eventually(t, "ClusterRole "+name+" cached", func() bool {
			_, err := s.a.RoleRules(context.Background(), rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, "")
			return err == nil
		})
	}

	forbidden := func(t *testing.T, err error, want string) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v, want Forbidden with %q", err, want)
		}
	}
	t.Run("role within what she holds", func(t *testing.T) {
		if err := s.create(t, alice, role("a", "reader", rule([]string{"get"}, "example.setpoint.dev", "widgets"))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("role beyond what she holds", func(t *testing.T) {
		err := s.create(t, alice, role("a", "secrets", rule([]string{"get", "list"}, "", "secrets")))
		forbidden(t, err, `user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`)
		if !strings.Contains(err.Error(), `{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`) {
			t.Errorf("err %v does not name the missing rule", err)
		}
	})
	t.Run("role in another namespace", func(t *testing.T) {
		forbidden(t, s.create(t, alice, role("b", "reader", rule([]string{"get"}, "example.setpoint.dev", "widgets"))), "not currently held")
	})
	t.Run("binding to a role she holds", func(t *testing.T) {
		if err := s.create(t, alice, roleBinding("a", "readers", "ClusterRole", "widget-reader", userSubject("bob"))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("binding to a role she does not hold", func(t *testing.T) {
		forbidden(t, s.create(t, alice, roleBinding("a", "secrets", "ClusterRole", "secret-reader", userSubject("bob"))), "not currently held")
		forbidden(t, s.create(t, alice, roleBinding("a", "admin", "ClusterRole", "cluster-admin", userSubject("alice"))), "not currently held")
	})
	t.Run("binding to a missing role", func(t *testing.T) {
		forbidden(t, s.create(t, alice, roleBinding("a", "ghost", "Role", "ghost", userSubject("bob"))), `"ghost" not found`)
	})
	t.Run("bind verb", func(t *testing.T) {
		binder := clusterRole("bind-secret-reader", rbacv1.PolicyRule{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"secret-reader"}})
		s.mustCreate(t, binder, roleBinding("a", "binder", "ClusterRole", "bind-secret-reader", userSubject("alice")))
		s.waitDecision(t, alice, authorizer.AttributesRecord{Verb: "bind", APIGroup: rbacv1.GroupName, Resource: "clusterroles", Name: "secret-reader", Namespace: "a", ResourceRequest: true}, authorizer.DecisionAllow)
		if err := s.create(t, alice, roleBinding("a", "secrets", "ClusterRole", "secret-reader", userSubject("bob"))); err != nil {
			t.Fatalf("bind on secret-reader: %v", err)
		}
		// bind is per role name, and per namespace.
		forbidden(t, s.create(t, alice, roleBinding("a", "admin", "ClusterRole", "cluster-admin", userSubject("alice"))), "not currently held")
		forbidden(t, s.create(t, alice, clusterRoleBinding("secrets", "secret-reader", userSubject("bob"))), "")
	})
	t.Run("escalate verb", func(t *testing.T) {
		esc := role("a", "escalator", rbacv1.PolicyRule{Verbs: []string{"escalate"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}})
		s.mustCreate(t, esc, roleBinding("a", "escalator", "Role", "escalator", userSubject("alice")))
		s.waitDecision(t, alice, authorizer.AttributesRecord{Verb: "escalate", APIGroup: rbacv1.GroupName, Resource: "roles", Name: "secrets", Namespace: "a", ResourceRequest: true}, authorizer.DecisionAllow)
		if err := s.create(t, alice, role("a", "secrets", rule([]string{"get", "list"}, "", "secrets"))); err != nil {
			t.Fatalf("escalate on roles: %v", err)
		}
	})
	t.Run("escalate on one role name", func(t *testing.T) {
		// As in Kubernetes, the name is the request's: a create has none.
		s.mustCreate(t, role("b", "esc-x", rbacv1.PolicyRule{Verbs: []string{"escalate", "update", "create"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}, ResourceNames: []string{"x"}}),
			roleBinding("b", "erin", "Role", "esc-x", userSubject("erin")))
		erin := who("erin")
		s.waitDecision(t, erin, authorizer.AttributesRecord{Verb: "escalate", APIGroup: rbacv1.GroupName, Resource: "roles", Name: "x", Namespace: "b", ResourceRequest: true}, authorizer.DecisionAllow)
		forbidden(t, s.create(t, erin, role("b", "x", rule([]string{"get"}, "", "secrets"))), "not currently held")
		s.mustCreate(t, role("b", "x"))
		ctx := request.WithUser(context.Background(), erin)
		u, err := s.svc.Get(ctx, kinds.RoleResource, "b", "x", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["rules"] = []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get"}}}
		if _, err := s.svc.Update(ctx, kinds.RoleResource, u, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update of a role erin may escalate: %v", err)
		}
	})
	t.Run("aggregationRule needs every permission", func(t *testing.T) {
		s.mustCreate(t, clusterRole("cr-writer", rule(readWrite, rbacv1.GroupName, "clusterroles")),
			clusterRoleBinding("carol", "cr-writer", userSubject("carol")))
		carol := who("carol")
		s.waitDecision(t, carol, resourceReq("create", rbacv1.GroupName, "clusterroles", "", ""), authorizer.DecisionAllow)
		agg := clusterRole("carol-agg")
		agg.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"x": "y"}}}}
		forbidden(t, s.create(t, carol, agg), "must have cluster-admin privileges to use the aggregationRule")
	})
	t.Run("system:masters", func(t *testing.T) {
		if err := s.create(t, who("root", user.SystemPrivilegedGroup), roleBinding("b", "admin", "ClusterRole", "cluster-admin", userSubject("dave"))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("update with the same rules", func(t *testing.T) {
		// alice may relabel her reader role, whose rules she holds; bob,
		// who holds only widget-reader, may not give it a rule he lacks.
		ctx := request.WithUser(context.Background(), alice)
		u, err := s.svc.Get(ctx, kinds.RoleResource, "a", "reader", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.SetLabels(map[string]string{"team": "a"})
		if u, err = s.svc.Update(ctx, kinds.RoleResource, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		u.Object["rules"] = []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"delete"}}}
		ctxBob := request.WithUser(context.Background(), who("bob"))
		_, err = s.svc.Update(ctxBob, kinds.RoleResource, u, metav1.UpdateOptions{})
		forbidden(t, err, `{APIGroups:[""], Resources:["secrets"], Verbs:["delete"]}`)
	})
}
