package plugins

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/auth/rbac"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/examples/widget/operator"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

var (
	benchWidgets    = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}
	benchProvisions = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgetprovisions"}
)

// benchEngine is a running engine over a real Badger store serving the
// Widget example's kinds, with an RBAC authorizer synced over it that
// holds the default roles, the Widget plugin's ClusterRole and binding,
// and 1,000 ClusterRoleBindings of 100 other users.
func benchEngine(b *testing.B) (*engine.Service, *rbac.Authorizer) {
	b.Helper()
	db, err := badger.Open(b.TempDir(), badger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := engine.New(context.Background(), engine.Options{Store: db, Logger: quietLogger()})
	if err != nil {
		db.Close()
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { svc.Run(ctx); done <- struct{}{} }()
	authz := rbac.New(rbac.Options{Logger: quietLogger()})
	b.Cleanup(func() { cancel(); <-done; <-done; svc.Close(); db.Close() })
	for _, f := range []string{"crd.yaml", "provision-crd.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "widget", f))
		if err != nil {
			b.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Create(ctx, kinds.CRDResource, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	testsupport.Eventually(b, time.Minute, "the example kinds served", func() bool {
		_, w := svc.Resource(benchWidgets)
		_, p := svc.Resource(benchProvisions)
		return w && p
	})
	if err := rbac.EnsureDefaults(ctx, svc); err != nil {
		b.Fatal(err)
	}
	put := func(gvr schema.GroupVersionResource, v any) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Create(ctx, gvr, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	binding := func(name, role, subject string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: subject}},
		}
	}
	sp := Spec{Reconcile: &ReconcileBinding{For: "widgets.example.setpoint.dev", Owns: []string{"widgetprovisions.example.setpoint.dev"}}}
	put(kinds.ClusterRoleResource, &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: RoleName("widget")},
		Rules:      sp.PolicyRules(),
	})
	put(kinds.ClusterRoleBindingResource, binding(RoleName("widget"), RoleName("widget"), PluginUser("widget").GetName()))
	for i := range 1000 {
		put(kinds.ClusterRoleBindingResource, binding("bench-"+strconv.Itoa(i), "view", "user-"+strconv.Itoa(i%100)))
	}
	go func() { _ = authz.Run(ctx, svc); done <- struct{}{} }()
	if err := authz.WaitSynced(ctx); err != nil {
		b.Fatal(err)
	}
	return svc, authz
}

// BenchmarkPluginAuthorize is the cost of one plugin access decision by
// the RBAC authorizer (1,000 other bindings held): the status write of a
// reconcile (allowed) and a write the role does not grant (denied, with
// its message).
func BenchmarkPluginAuthorize(b *testing.B) {
	_, authz := benchEngine(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name  string
		attrs func() error
		allow bool
	}{
		{"allowed", func() error {
			return authorize(ctx, authz, "widget", accessOf("update", benchWidgets, "status", "default", "w1"))
		}, true},
		{"denied", func() error {
			return authorize(ctx, authz, "widget", accessOf("delete", benchWidgets, "", "default", "w1"))
		}, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.attrs(); (err == nil) != bc.allow {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReconcileAuthorized converges SETPOINT_BENCH_OBJECTS (default
// 2,000) Widgets through the engine's controller with the Widget
// operator called natively, its client the engine itself ("none") or
// the engine behind the plugin's RBAC authorization ("rbac"): each
// object's child create, status writes, list and watch are decided by
// the RBAC authorizer. It reports objects Ready per second and the
// process's CPU per object.
//
//	go test -run '^$' -bench ReconcileAuthorized -benchtime 1x -count 3 ./engine/plugins
func BenchmarkReconcileAuthorized(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("SETPOINT_BENCH_OBJECTS")); err == nil && v > 0 {
		n = v
	}
	for _, mode := range []string{"none", "rbac"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				svc, authz := benchEngine(b)
				var c controller.Client = svc
				counted := &countedAuthorizer{Authorizer: authz}
				if mode == "rbac" {
					c = authorizeClient(counted, "widget", svc)
				}
				elapsed, cpu := convergeWidgets(b, svc, c, n)
				b.ReportMetric(float64(n)/elapsed.Seconds(), "objects/s")
				b.ReportMetric(float64(cpu)/float64(n)/1e3, "cpu-µs/object")
				b.ReportMetric(float64(counted.n.Load())/float64(n), "decisions/object")
			}
		})
	}
}

// countedAuthorizer counts the decisions it asks of its Authorizer.
type countedAuthorizer struct {
	authorizer.Authorizer
	n atomic.Int64
}

func (c *countedAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	c.n.Add(1)
	return c.Authorizer.Authorize(ctx, a)
}

type nativeWidget struct{ op *operator.Operator }

func (n nativeWidget) Reconcile(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return n.op.Reconcile(&plugintest.Host{}, req)
}

// convergeWidgets creates n Widgets, then runs the controller over c until
// every one is Ready, and returns the time and the process's CPU it took.
func convergeWidgets(b *testing.B, svc *engine.Service, c controller.Client, n int) (time.Duration, int64) {
	b.Helper()
	ctx := context.Background()
	for i := range n {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w" + strconv.Itoa(i), "namespace": "default"},
			"spec":     map[string]any{"name": "Widget " + strconv.Itoa(i), "size": "small"},
		}}
		if _, err := svc.Create(ctx, benchWidgets, u, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	list, err := svc.List(ctx, benchWidgets, "default", metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	w, err := svc.Watch(ctx, benchWidgets, "default", metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	ctl, err := controller.New(controller.Options{
		Name: "widget", Client: c, Reconciler: nativeWidget{op: &operator.Operator{}}, Logger: quietLogger(),
		For:  controller.Kind{Resource: benchWidgets, Kind: "Widget", Namespaced: true},
		Owns: []controller.Kind{{Resource: benchProvisions, Kind: "WidgetProvision", Namespaced: true}},
		User: PluginUser("widget"),
	})
	if err != nil {
		b.Fatal(err)
	}
	m := controller.NewManager(controller.ManagerOptions{Logger: quietLogger()})
	m.Put(ctl)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	b.ResetTimer()
	start, cpu := time.Now(), processCPU()
	go func() { done <- m.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	ready := make(map[string]bool, n)
	timeout := time.After(10 * time.Minute)
	for len(ready) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("watch ended with %d of %d Ready", len(ready), n)
			}
			if ev.Type != watch.Modified {
				continue
			}
			u := ev.Object.(*unstructured.Unstructured)
			if st, _, _ := unstructured.NestedString(u.Object, "status", "state"); st == operator.StateReady {
				ready[u.GetName()] = true
			}
		case <-timeout:
			b.Fatalf("%d of %d Ready after 10 minutes", len(ready), n)
		}
	}
	return time.Since(start), processCPU() - cpu
}

// processCPU is the CPU time (user and system) of the process so far, in
// ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(fmt.Sprintf("getrusage: %v", err))
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
