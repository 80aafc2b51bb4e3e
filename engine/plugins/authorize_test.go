package plugins

import (
	"context"
	"fmt"
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
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/setpoint-dev/setpoint/engine/auth/rbac"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// grants is a fake authorizer: it allows the "verb resource[/sub]" pairs
// it holds, for the plugin user "system:setpoint:plugin:p" only, and
// records every request it decides.
type grants struct {
	mu    sync.Mutex
	allow map[string]bool
	asked []string
}

func (g *grants) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	res := a.GetResource()
	if a.GetSubresource() != "" {
		res += "/" + a.GetSubresource()
	}
	key := a.GetVerb() + " " + res
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, fmt.Sprintf("%s %s %s/%s %v", a.GetUser().GetName(), key, a.GetNamespace(), a.GetName(), a.GetUser().GetGroups()))
	if a.GetUser().GetName() == "system:setpoint:plugin:p" && g.allow[key] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (g *grants) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(g.Authorize(ctx, a))
}

func (g *grants) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

var _ authorizer.Authorizer = (*grants)(nil)

// wantDenied fails unless err denies plugin p the access, in the words of
// kube-apiserver's 403, with the hint naming its ClusterRole.
func wantDenied(t *testing.T, what string, err error, access string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: allowed, want denied", what)
	}
	msg := err.Error()
	for _, want := range []string{
		`User "system:setpoint:plugin:p" cannot ` + access,
		`ClusterRole setpoint:plugin:p`,
		`spec.permissions`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: error %q, want it to say %q", what, msg, want)
		}
	}
}

// TestObjectsAuthorized checks that each host-call read, write and event
// of a plugin is decided by the authorizer as the plugin's user, and that
// a denial is a 403 naming the access and the plugin's ClusterRole.
func TestObjectsAuthorized(t *testing.T) {
	ctx := context.Background()
	svc := newWriteService(t)
	g := &grants{allow: map[string]bool{"get notes": true, "create notes": true}}
	o := NewObjects(svc, quietLogger())
	o.Authorize(g)

	t.Run("allowed read", func(t *testing.T) {
		if _, found, err := o.GetObject(ctx, "p", abi.GetRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Note", Namespace: "default", Name: "n1"}); err != nil || found {
			t.Errorf("get: found %v, %v; want not found, no error", found, err)
		}
		if _, _, err := o.GetObject(ctx, "q", abi.GetRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Note", Namespace: "default", Name: "n1"}); !apierrors.IsForbidden(err) {
			t.Errorf("get as another plugin: %v, want Forbidden", err)
		}
	})
	t.Run("denied read", func(t *testing.T) {
		_, err := o.ListObjects(ctx, "p", abi.ListRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Note", Namespace: "default"})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("list: %v, want Forbidden", err)
		}
		wantDenied(t, "list", err, `list resource "notes" in API group "example.setpoint.dev" in the namespace "default"`)
	})
	t.Run("allowed write", func(t *testing.T) {
		resp := o.WriteObject(ctx, "p", abi.HostCreate, abi.WriteRequest{Object: note("n1", "small", "")})
		if resp.Error != "" {
			t.Fatalf("create: %s", resp.Error)
		}
	})
	t.Run("denied write", func(t *testing.T) {
		resp := o.WriteObject(ctx, "p", abi.HostPatch, withPatch(noteRef, "status", `{"status":{"state":"patched"}}`))
		if resp.Code != 403 || resp.Reason != string(metav1.StatusReasonForbidden) {
			t.Fatalf("patch status: %+v, want 403 Forbidden", resp)
		}
		wantDenied(t, "patch status", fmt.Errorf("%s", resp.Error), `patch resource "notes/status" in API group "example.setpoint.dev" in the namespace "default"`)
		got, err := svc.Get(ctx, schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "notes"}, "default", "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s, _, _ := unstructured.NestedString(got.Object, "status", "state"); s == "patched" {
			t.Errorf("a denied status patch was stored")
		}
		resp = o.WriteObject(ctx, "p", abi.HostDelete, noteRef)
		if resp.Code != 403 {
			t.Errorf("delete: %+v, want 403", resp)
		}
	})
	t.Run("denied event", func(t *testing.T) {
		err := o.RecordEvent(ctx, "p", abi.ObjectRef{APIVersion: "example.setpoint.dev/v1", Kind: "Note", Namespace: "default", Name: "n1"},
			abi.Event{Type: "Normal", Reason: "Seen", Message: "hello"})
		wantDenied(t, "event", err, `create resource "events" in API group "" in the namespace "default"`)
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, want := range []string{
		"system:setpoint:plugin:p get notes default/n1 [system:setpoint:plugins system:authenticated]",
		"system:setpoint:plugin:p create notes default/ [system:setpoint:plugins system:authenticated]",
		"system:setpoint:plugin:p patch notes/status default/n1 [system:setpoint:plugins system:authenticated]",
		"system:setpoint:plugin:p delete notes default/n1 [system:setpoint:plugins system:authenticated]",
	} {
		if !strings.Contains(strings.Join(g.asked, "\n"), want) {
			t.Errorf("the authorizer was not asked %q; asked:\n%s", want, strings.Join(g.asked, "\n"))
		}
	}
}

// TestAuthorizedClient checks that a reconcile binding's client (what its
// controller lists, watches and writes) is authorized as the plugin.
func TestAuthorizedClient(t *testing.T) {
	ctx := context.Background()
	svc := newWriteService(t)
	notes := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "notes"}
	g := &grants{allow: map[string]bool{"list notes": true, "create notes": true}}
	c := authorizeClient(g, "p", svc)
	if _, err := c.List(ctx, notes, "", metav1.ListOptions{}); err != nil {
		t.Errorf("list: %v", err)
	}
	_, err := c.Watch(ctx, notes, "", metav1.ListOptions{})
	wantDenied(t, "watch", err, `watch resource "notes" in API group "example.setpoint.dev" at the cluster scope`)
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(note("n1", "small", "")); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace("default")
	created, err := c.Create(ctx, notes, &u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	_, err = c.UpdateStatus(ctx, notes, created, metav1.UpdateOptions{})
	wantDenied(t, "update status", err, `update resource "notes/status" in API group "example.setpoint.dev" in the namespace "default"`)
	err = c.Delete(ctx, notes, "default", "n1", metav1.DeleteOptions{})
	wantDenied(t, "delete", err, `delete resource "notes"`)
	if authorizeClient(nil, "p", svc) != svc {
		t.Errorf("without an authorizer the client is not the service itself")
	}
}

// TestAuthorizedBeforeRBACSync checks, with the real RBAC authorizer, that
// a plugin's call made before RBAC has loaded its objects is neither
// allowed nor denied for want of them: it waits, and is decided by the
// rules once loaded (and fails with its deadline if they never load).
func TestAuthorizedBeforeRBACSync(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := newWriteService(t)
	put := func(gvr schema.GroupVersionResource, v any) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Create(ctx, gvr, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(kinds.ClusterRoleResource, &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: RoleName("p")},
		Rules:      Spec{Permissions: Permissions{Read: []string{"notes.example.setpoint.dev"}}}.PolicyRules(),
	})
	put(kinds.ClusterRoleBindingResource, &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: RoleName("p")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RoleName("p")},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: PluginUser("p").GetName()}},
	})
	authz := rbac.New(rbac.Options{Logger: quietLogger()})
	o := NewObjects(svc, quietLogger())
	o.Authorize(authz)
	req := abi.ListRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Note", Namespace: "default"}

	// Never loaded: the call ends with its deadline, denied, not allowed.
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := o.ListObjects(short, "p", req)
	stop()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "rbac: wait for the cache") {
		t.Errorf("a call before RBAC loaded, past its deadline: %v, want Forbidden saying it waited for the cache", err)
	}

	// Made before the load, decided after it by the rules.
	listed, created := make(chan error, 1), make(chan abi.WriteResponse, 1)
	go func() {
		_, err := o.ListObjects(ctx, "p", req)
		listed <- err
	}()
	go func() {
		created <- o.WriteObject(ctx, "p", abi.HostCreate, abi.WriteRequest{Object: note("n1", "small", "")})
	}()
	go func() { _ = authz.Run(ctx, svc) }()
	select {
	case err := <-listed:
		if err != nil {
			t.Errorf("a list made before RBAC loaded: %v, want it allowed by the rules once loaded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a list made before RBAC loaded is still waiting 10s on")
	}
	select {
	case resp := <-created:
		if resp.Code != 403 || !strings.Contains(resp.Error, `cannot create resource "notes"`) || strings.Contains(resp.Error, "wait for the cache") {
			t.Errorf("a create made before RBAC loaded: %+v, want it denied by the rules once loaded", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a create made before RBAC loaded is still waiting 10s on")
	}
	if _, err := o.ListObjects(ctx, "p", req); err != nil {
		t.Errorf("list once loaded: %v", err)
	}
	if resp := o.WriteObject(ctx, "p", abi.HostCreate, abi.WriteRequest{Object: note("n2", "small", "")}); resp.Code != 403 {
		t.Errorf("create once loaded: %+v, want 403", resp)
	}
}
