package plugins

import (
	"context"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// TestPluginRoleEditDuringReconcileKept: an administrator's edit of a
// Plugin's ClusterRole that lands between the manager's read of the role
// and its write (here made inside the write's admission) is kept: the
// manager's apply, made from the read, conflicts and is tried again from
// the edited role, rather than writing the rules it computed from the
// role as it was.
func TestPluginRoleEditDuringReconcileKept(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	var edit func() // run once, on the next write of the role
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger(), Admitter: engine.AdmitterFuncs{
		MutateFunc: func(_ context.Context, req *engine.AdmissionRequest) error {
			if e := edit; e != nil && req.Resource == kinds.ClusterRoleResource && req.Operation == engine.OpUpdate {
				edit = nil
				e()
			}
			return nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	m := &Manager{opts: Options{Service: svc}}
	plugin := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p", "uid": "6c1f0f8e-5b1a-4d7e-9a51-0c3f3d0f2a11"}}}
	sp := Spec{Permissions: Permissions{Read: []string{"namespaces"}}}
	ensure := func() {
		t.Helper()
		for range 5 { // the reconcile's retries
			if err = m.ensureRole(ctx, plugin, sp); !apierrors.IsConflict(err) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rules := func() []rbacv1.PolicyRule {
		u, err := svc.Get(ctx, kinds.ClusterRoleResource, "", RoleName("p"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var r rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
			t.Fatal(err)
		}
		return r.Rules
	}
	ensure()
	added := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}
	edit = func() {
		u, err := svc.Get(ctx, kinds.ClusterRoleResource, "", RoleName("p"), metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		list, _, _ := unstructured.NestedSlice(u.Object, "rules")
		m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&added)
		u.Object["rules"] = append(list, m)
		if _, err := svc.Update(ctx, kinds.ClusterRoleResource, u, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}
	sp.Permissions.Write = []string{"events"} // the spec changes: the manager writes
	ensure()
	if edit != nil {
		t.Fatal("the manager's second write did not reach admission")
	}
	if got := rules(); !slices.ContainsFunc(got, func(r rbacv1.PolicyRule) bool { return slices.Equal(r.Resources, added.Resources) }) {
		t.Errorf("the administrator's rule made during the manager's write was lost: %v", got)
	}
}
