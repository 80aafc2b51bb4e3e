package plugins

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/util/retry"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

func prule(verbs []string, group, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{group}, Resources: []string{resource}}
}

// TestSpecPolicyRules checks the RBAC rules a spec's permissions become.
func TestSpecPolicyRules(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want []rbacv1.PolicyRule
	}{
		{"nothing", Spec{}, nil},
		{"read and write", Spec{Permissions: Permissions{Read: []string{"widgets.example.setpoint.dev", "namespaces"}, Write: []string{"gadgets.example.setpoint.dev", "events"}}},
			[]rbacv1.PolicyRule{
				prule(readVerbs, "example.setpoint.dev", "widgets"),
				prule(readVerbs, "", "namespaces"),
				prule(writeVerbs, "example.setpoint.dev", "gadgets"),
				prule(statusVerbs, "example.setpoint.dev", "gadgets/status"),
				prule(emitVerbs, "", "events"),
			}},
		{"everything", Spec{Permissions: Permissions{Read: []string{"*"}, Write: []string{"*"}}},
			[]rbacv1.PolicyRule{prule(readVerbs, "*", "*"), prule(writeVerbs, "*", "*"), prule(emitVerbs, "", "events")}},
		{"reconcile", Spec{Reconcile: &ReconcileBinding{For: "widgets.example.setpoint.dev", Owns: []string{"gadgets.example.setpoint.dev"}}},
			[]rbacv1.PolicyRule{
				prule(forVerbs, "example.setpoint.dev", "widgets"),
				prule(statusVerbs, "example.setpoint.dev", "widgets/status"),
				prule(ownVerbs, "example.setpoint.dev", "gadgets"),
				prule(emitVerbs, "", "events"),
			}},
		{"admission", Spec{Admission: []AdmissionRule{
			{Resources: []string{"widgets.example.setpoint.dev"}, Type: Validating},
			{Resources: []string{"*"}, Type: Mutating},
		}}, []rbacv1.PolicyRule{prule(readVerbs, "example.setpoint.dev", "widgets"), prule(mutateVerbs, "*", "*")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.spec.PolicyRules()); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

type heldRules []rbacv1.PolicyRule

func (h heldRules) PolicyRules(context.Context, user.Info, string) ([]rbacv1.PolicyRule, error) {
	return h, nil
}

// TestCheckInstaller checks that a Plugin is installed or upgraded only by
// a user who holds every permission it asks for.
func TestCheckInstaller(t *testing.T) {
	a := NewAdmitter(quietLogger())
	a.CheckInstallers(heldRules{prule([]string{"*"}, "example.setpoint.dev", "*")})
	plugin := func(write string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": Group + "/" + Version, "kind": Kind, "metadata": map[string]any{"name": "p"},
			"spec": map[string]any{
				"module":      map[string]any{"digest": digestOf([]byte("m"))},
				"permissions": map[string]any{"write": []any{write}},
			},
		}}
	}
	req := func(op engine.Operation, u user.Info, obj, old *unstructured.Unstructured) *engine.AdmissionRequest {
		return &engine.AdmissionRequest{Operation: op, Resource: Resource, Name: "p", Object: obj, OldObject: old, User: u}
	}
	dev := &user.DefaultInfo{Name: "dev"}
	ctx := context.Background()
	if err := a.Validate(ctx, req(engine.OpCreate, dev, plugin("widgets.example.setpoint.dev"), nil)); err != nil {
		t.Errorf("a plugin within the installer's permissions: %v", err)
	}
	err := a.Validate(ctx, req(engine.OpCreate, dev, plugin("secrets"), nil))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `{APIGroups:[""], Resources:["secrets"], Verbs:["create"]}`) {
		t.Errorf("a plugin beyond the installer's permissions: %v", err)
	}
	err = a.Validate(ctx, req(engine.OpUpdate, dev, plugin("secrets"), plugin("widgets.example.setpoint.dev")))
	if !apierrors.IsForbidden(err) {
		t.Errorf("an upgrade beyond the installer's permissions: %v", err)
	}
	// A write that leaves the spec alone (labels, the manager's status) is
	// not checked; nor are system:masters and the server itself.
	if err := a.Validate(ctx, req(engine.OpUpdate, dev, plugin("secrets"), plugin("secrets"))); err != nil {
		t.Errorf("an update leaving the spec alone: %v", err)
	}
	if err := a.Validate(ctx, req(engine.OpCreate, &user.DefaultInfo{Name: "root", Groups: []string{user.SystemPrivilegedGroup}}, plugin("secrets"), nil)); err != nil {
		t.Errorf("system:masters: %v", err)
	}
	if err := a.Validate(ctx, req(engine.OpCreate, nil, plugin("secrets"), nil)); err != nil {
		t.Errorf("the server: %v", err)
	}
}

// TestPluginRole checks that the manager keeps a Plugin's ClusterRole and
// its binding to the plugin's user in step with its spec.
func TestPluginRole(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	db := openTestDB(t)
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{current: map[string]string{}}
	modules := NewModules(db)
	m, err := New(Options{Service: svc, Modules: modules, Host: h, Logger: quietLogger(), Registerer: prometheus.NewRegistry(),
		Controllers: controller.NewManager(controller.ManagerOptions{Logger: quietLogger()})})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	wasm := []byte("good module")
	if _, err := modules.Put(ctx, digestOf(wasm), wasm); err != nil {
		t.Fatal(err)
	}
	waitServed(t, svc)
	plugin := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": "policy"},
		"spec": map[string]any{
			"module":      map[string]any{"digest": digestOf(wasm)},
			"permissions": map[string]any{"read": []any{"namespaces"}},
		},
	}}
	created, err := svc.Create(ctx, Resource, plugin, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roleRules := func() ([]rbacv1.PolicyRule, string) {
		u, err := svc.Get(ctx, rbacv1.SchemeGroupVersion.WithResource("clusterroles"), "", "setpoint:plugin:policy", metav1.GetOptions{})
		if err != nil {
			return nil, err.Error()
		}
		var r rbacv1.ClusterRole
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r)
		if len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != created.GetUID() {
			return nil, "not owned by the Plugin"
		}
		return r.Rules, ""
	}
	testsupport.Poll(t, 10*time.Second, "the plugin's ClusterRole", func() (bool, string) {
		rules, why := roleRules()
		return cmp.Equal(rules, []rbacv1.PolicyRule{prule(readVerbs, "", "namespaces")}), why
	})
	var u *unstructured.Unstructured
	testsupport.Poll(t, 10*time.Second, "the plugin's ClusterRoleBinding", func() (bool, string) {
		u, err = svc.Get(ctx, rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), "", "setpoint:plugin:policy", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	var b rbacv1.ClusterRoleBinding
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b)
	if b.RoleRef.Name != "setpoint:plugin:policy" || len(b.Subjects) != 1 || b.Subjects[0].Name != "system:setpoint:plugin:policy" || b.Subjects[0].Kind != "User" {
		t.Errorf("binding %+v", b)
	}
	// An upgrade that asks for more changes the role.
	// (The manager writes the Plugin too: retry on conflicts.)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := svc.Get(ctx, Resource, "", "policy", metav1.GetOptions{})
		if err != nil {
			return err
		}
		_ = unstructured.SetNestedStringSlice(cur.Object, []string{"events"}, "spec", "permissions", "write")
		_, err = svc.Update(ctx, Resource, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 10*time.Second, "the plugin's ClusterRole updated", func() (bool, string) {
		rules, why := roleRules()
		return cmp.Equal(rules, []rbacv1.PolicyRule{prule(readVerbs, "", "namespaces"), prule(emitVerbs, "", "events")}), why
	})
}

// TestPluginRoleAdminEdits checks what the manager does with an
// administrator's edits of a plugin's ClusterRole, as Kubernetes does with
// its default roles: a rule of the spec taken out comes back, a rule added
// stays, and a role annotated autoupdate "false" is left alone.
func TestPluginRoleAdminEdits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	db := openTestDB(t)
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Service: svc, Modules: NewModules(db), Host: &fakeHost{current: map[string]string{}}, Logger: quietLogger(),
		Registerer: prometheus.NewRegistry(), Controllers: controller.NewManager(controller.ManagerOptions{Logger: quietLogger()})})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	wasm := []byte("good module")
	if _, err := m.opts.Modules.Put(ctx, digestOf(wasm), wasm); err != nil {
		t.Fatal(err)
	}
	waitServed(t, svc)
	if _, err := svc.Create(ctx, Resource, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind, "metadata": map[string]any{"name": "edited"},
		"spec": map[string]any{
			"module":      map[string]any{"digest": digestOf(wasm)},
			"permissions": map[string]any{"read": []any{"namespaces"}, "write": []any{"events"}},
		},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	roles := rbacv1.SchemeGroupVersion.WithResource("clusterroles")
	rules := func() []rbacv1.PolicyRule {
		u, err := svc.Get(ctx, roles, "", RoleName("edited"), metav1.GetOptions{})
		if err != nil {
			return nil
		}
		var r rbacv1.ClusterRole
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r)
		return r.Rules
	}
	specRules := []rbacv1.PolicyRule{prule(readVerbs, "", "namespaces"), prule(emitVerbs, "", "events")}
	testsupport.Poll(t, 10*time.Second, "the plugin's ClusterRole", func() (bool, string) {
		got := rules()
		return cmp.Equal(got, specRules), fmt.Sprint(got)
	})
	added := prule([]string{"get"}, "", "configmaps")
	// edit sets the role's rules and autoupdate annotation, then has the
	// manager reconcile the Plugin (a label change).
	edit := func(rs []rbacv1.PolicyRule, autoupdate string, label string) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u, err := svc.Get(ctx, roles, "", RoleName("edited"), metav1.GetOptions{})
			if err != nil {
				return err
			}
			var list []any
			for _, r := range rs {
				m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
				list = append(list, m)
			}
			u.Object["rules"] = list
			a := u.GetAnnotations()
			if autoupdate == "" {
				delete(a, rbacv1.AutoUpdateAnnotationKey)
			} else {
				a[rbacv1.AutoUpdateAnnotationKey] = autoupdate
			}
			u.SetAnnotations(a)
			_, err = svc.Update(ctx, roles, u, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := svc.Get(ctx, Resource, "", "edited", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.SetLabels(map[string]string{"touch": label})
			_, err = svc.Update(ctx, Resource, cur, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The events rule taken out, a configmaps rule added: the first comes
	// back, the second stays.
	edit([]rbacv1.PolicyRule{specRules[0], added}, "", "1")
	testsupport.Poll(t, 10*time.Second, "the spec's rule back, the added one kept", func() (bool, string) {
		got := rules()
		return cmp.Equal(got, append(slices.Clone(specRules), added)), fmt.Sprint(got)
	})
	// Annotated autoupdate "false", the role stays as edited, even when
	// the spec then asks for more.
	edit([]rbacv1.PolicyRule{specRules[0]}, "false", "2")
	var gen int64
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := svc.Get(ctx, Resource, "", "edited", metav1.GetOptions{})
		if err != nil {
			return err
		}
		_ = unstructured.SetNestedStringSlice(cur.Object, []string{"namespaces", "*"}, "spec", "permissions", "read")
		out, err := svc.Update(ctx, Resource, cur, metav1.UpdateOptions{})
		if err == nil {
			gen = out.GetGeneration()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 10*time.Second, "the Plugin's new spec observed", func() (bool, string) {
		cur, err := svc.Get(ctx, Resource, "", "edited", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		og, _, _ := unstructured.NestedInt64(cur.Object, "status", "observedGeneration")
		return og >= gen, fmt.Sprint(og)
	})
	if got := rules(); !cmp.Equal(got, specRules[:1]) {
		t.Errorf("a role annotated autoupdate=false was changed: %v", got)
	}
}
