package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// replicaClient sends requests to one replica over one connection pool.
type replicaClient struct {
	name string
	s    *testserver.Server
	c    *http.Client
}

func newReplicaClients(rs []*testserver.Server) []*replicaClient {
	out := make([]*replicaClient, len(rs))
	for i, s := range rs {
		c := s.HTTPClient()
		c.Timeout = 10 * time.Second
		out[i] = &replicaClient{name: string(rune('A' + i)), s: s, c: c}
	}
	return out
}

// do sends body (JSON, when not nil) with token and returns the status code
// and the body of the answer; a transport error is code 0 and its text.
func (r *replicaClient) do(method, path, token string, body any) (int, string) {
	ct := "application/json"
	if method == http.MethodPatch {
		ct = "application/merge-patch+json"
	}
	opts := testserver.DoOptions{Client: r.c}
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err.Error()
		}
		in = bytes.NewReader(b)
		opts.Header = http.Header{"Content-Type": {ct}}
	}
	code, b, err := r.s.DoWith(method, path, token, in, opts)
	if code == 0 {
		return 0, err.Error()
	}
	return code, string(b)
}

// must sends a request and fails t unless the answer is 2xx.
func (r *replicaClient) must(t *testing.T, method, path string, body any) string {
	t.Helper()
	code, out := r.do(method, path, r.s.Token, body)
	if code/100 != 2 {
		t.Fatalf("%s %s via %s: %d %s", method, path, r.name, code, out)
	}
	return out
}

// propagation polls every replica, each in its own goroutine, from the
// moment it is called until holds says the change is in force there, and
// returns each replica's delay counted from since (when the write that
// made the change was answered). It fails t for a replica where it is not
// in force within 20 s.
func propagation(t *testing.T, what string, since time.Time, rcs []*replicaClient, holds func(r *replicaClient) (bool, string)) []time.Duration {
	t.Helper()
	delays := make([]time.Duration, len(rcs))
	var wg sync.WaitGroup
	for i, r := range rcs {
		wg.Go(func() {
			deadline := time.Now().Add(20 * time.Second)
			for {
				ok, state := holds(r)
				if ok {
					delays[i] = time.Since(since)
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("%s: not in force on replica %s within 20 s: %s", what, r.name, state)
					delays[i] = -1
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	var parts []string
	for i, d := range delays {
		parts = append(parts, fmt.Sprintf("%s %.0fms", rcs[i].name, float64(d.Microseconds())/1000))
	}
	t.Logf("%s: in force after %s", what, strings.Join(parts, ", "))
	return delays
}

// withinOf fails t when a follower's delay passes lag after the delay of
// the replica the change was made through (delays[0]): for a change that
// costs each replica the same work (a Plugin's module to instantiate).
func withinOf(t *testing.T, what string, delays []time.Duration, lag time.Duration) {
	t.Helper()
	for i, d := range delays[1:] {
		if d >= 0 && d-delays[0] > lag {
			t.Errorf("%s: in force on replica %c %v after the replica it was made through, want within %v", what, 'B'+i, d-delays[0], lag)
		}
	}
}

// within fails t when a follower's delay passes limit.
func within(t *testing.T, what string, delays []time.Duration, limit time.Duration) {
	t.Helper()
	for i, d := range delays[1:] {
		if d > limit {
			t.Errorf("%s: in force on replica %c after %v, want within %v", what, 'B'+i, d, limit)
		}
	}
}

const (
	gizmoGroup   = "prop.example.setpoint.dev"
	gizmosPath   = "/apis/" + gizmoGroup + "/v1/namespaces/default/gizmos"
	gizmoCRDPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos." + gizmoGroup
)

func gizmoCRDObject(spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos." + gizmoGroup},
		"spec": map[string]any{
			"group": gizmoGroup, "scope": "Namespaced",
			"names": map[string]any{"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{"spec": spec}}}}},
		},
	}
}

// TestReplicasChangesPropagate: three replicas on one etcd. Each change
// made through replica A is in force on B and C within a second of the
// write that made it, because each replica follows the store: a new CRD
// (served, in discovery, accepting creates), a schema change (its new
// validation enforced), a Plugin's install, upgrade and deletion (the
// admission rule of the version in force, then none), a RoleBinding and its
// removal (a user's access granted, then revoked). The delays are logged.
// A Plugin's new module is instantiated by every replica, the one it was
// installed through included, so its install and upgrade are measured
// against when they are in force there.
func TestReplicasChangesPropagate(t *testing.T) {
	v1, err := os.ReadFile(wasmModule(t, "lifecyclev1"))
	if err != nil {
		t.Fatal(err)
	}
	v2 := builtModule(t, "lifecyclegrow")
	const annToken = "propagate-ann-token-0123456789"
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte(annToken+",ann,uid-ann\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := etcdtest.Start(t, etcdtest.Options{})
	rs := testserver.StartReplicas(t, testserver.ReplicasOptions{Endpoints: []string{e.Endpoint}, Prefix: "/propagate",
		Args: []string{"--token-auth-file", tokens}, LogLevel: "info"})
	rcs := newReplicaClients(rs)
	a := rcs[0]
	var n atomic.Int64
	gizmo := func(labels map[string]any, spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": gizmoGroup + "/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": fmt.Sprintf("g-%d", n.Add(1)), "labels": labels}, "spec": spec}
	}

	// A CRD: discovery lists it and a create through each replica succeeds.
	a.must(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
		gizmoCRDObject(map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}))
	d := propagation(t, "a new CRD", time.Now(), rcs, func(r *replicaClient) (bool, string) {
		code, out := r.do("GET", "/apis/"+gizmoGroup+"/v1", r.s.Token, nil)
		if code != http.StatusOK || !strings.Contains(out, `"gizmos"`) {
			return false, fmt.Sprintf("discovery: %d %s", code, out)
		}
		code, out = r.do("POST", gizmosPath, r.s.Token, gizmo(nil, map[string]any{"size": 9}))
		return code == http.StatusCreated, fmt.Sprintf("create: %d %s", code, out)
	})
	within(t, "a new CRD", d, time.Second)

	// A schema change: spec.size gets a maximum of 5.
	var crd map[string]any
	if err := json.Unmarshal([]byte(a.must(t, "GET", gizmoCRDPath, nil)), &crd); err != nil {
		t.Fatal(err)
	}
	crd["spec"] = gizmoCRDObject(map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true,
		"properties": map[string]any{"size": map[string]any{"type": "integer", "maximum": 5}}})["spec"]
	a.must(t, "PUT", gizmoCRDPath, crd)
	d = propagation(t, "a schema change", time.Now(), rcs, func(r *replicaClient) (bool, string) {
		code, out := r.do("POST", gizmosPath, r.s.Token, gizmo(nil, map[string]any{"size": 9}))
		return code == http.StatusUnprocessableEntity && strings.Contains(out, "spec.size"), fmt.Sprintf("create with size 9: %d %s", code, out)
	})
	within(t, "a schema change", d, time.Second)

	// A Plugin with an admission rule, then its upgrade, then its deletion.
	denied := func(by string) func(r *replicaClient) (bool, string) {
		return func(r *replicaClient) (bool, string) {
			code, out := r.do("POST", gizmosPath, r.s.Token, gizmo(map[string]any{"deny": "yes"}, map[string]any{"size": 1}))
			if by == "" {
				return code == http.StatusCreated, fmt.Sprintf("create labelled deny: %d %s", code, out)
			}
			return code == http.StatusUnprocessableEntity && strings.Contains(out, "denied by "+by), fmt.Sprintf("create labelled deny: %d %s", code, out)
		}
	}
	d1 := mustUpload(t, a.s, v1)
	d2 := mustUpload(t, a.s, v2)
	// Each replica compiles the modules it loads (the replica an upload
	// went through keeps the version its check compiled). Two Plugins
	// without bindings make every replica compile both modules first, so
	// that what is measured below is how fast the changes of the Plugin
	// "life" reach the replicas, not how fast a loaded machine compiles.
	for _, w := range []struct{ name, digest string }{{"warm-v1", d1}, {"warm-v2", d2}} {
		a.must(t, "POST", pluginsPath, map[string]any{"apiVersion": "setpoint.dev/v1alpha1", "kind": "Plugin",
			"metadata": map[string]any{"name": w.name}, "spec": map[string]any{"module": map[string]any{"digest": w.digest}}})
		for _, r := range rcs {
			testsupport.Poll(t, 60*time.Second, "plugin "+w.name+" loaded on replica "+r.name, func() (bool, string) {
				return strings.Contains(r.s.Logs(), `msg="plugin loaded" component=plugins plugin=`+w.name+" "), "not in its log"
			})
		}
	}
	a.must(t, "POST", pluginsPath, map[string]any{"apiVersion": "setpoint.dev/v1alpha1", "kind": "Plugin",
		"metadata": map[string]any{"name": "life"},
		"spec": map[string]any{"module": map[string]any{"digest": d1},
			"admission": []any{map[string]any{"resources": []any{"gizmos." + gizmoGroup}, "operations": []any{"CREATE"}, "type": "Validating"}}}})
	d = propagation(t, "a Plugin's install", time.Now(), rcs, denied("v1"))
	withinOf(t, "a Plugin's install", d, time.Second)

	a.must(t, "PATCH", pluginsPath+"/life", map[string]any{"spec": map[string]any{"module": map[string]any{"digest": d2}}})
	d = propagation(t, "a Plugin's upgrade", time.Now(), rcs, denied("v2"))
	withinOf(t, "a Plugin's upgrade", d, time.Second)

	a.must(t, "DELETE", pluginsPath+"/life", nil)
	d = propagation(t, "a Plugin's deletion", time.Now(), rcs, denied(""))
	within(t, "a Plugin's deletion", d, time.Second)

	// RBAC: ann may list gizmos once a RoleBinding says so, and no longer
	// once it is gone.
	annLists := func(want int) func(r *replicaClient) (bool, string) {
		return func(r *replicaClient) (bool, string) {
			code, out := r.do("GET", gizmosPath, annToken, nil)
			return code == want, fmt.Sprintf("ann lists gizmos: %d %s", code, out)
		}
	}
	for _, r := range rcs {
		if ok, state := annLists(http.StatusForbidden)(r); !ok {
			t.Fatalf("before the RoleBinding, replica %s: %s", r.name, state)
		}
	}
	a.must(t, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": "gizmo-reader"},
		"rules": []any{map[string]any{"apiGroups": []any{gizmoGroup}, "resources": []any{"gizmos"}, "verbs": []any{"get", "list"}}}})
	a.must(t, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "ann-reads-gizmos"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gizmo-reader"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ann"}}})
	d = propagation(t, "a RoleBinding", time.Now(), rcs, annLists(http.StatusOK))
	within(t, "a RoleBinding", d, time.Second)
	a.must(t, "DELETE", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/ann-reads-gizmos", nil)
	d = propagation(t, "a RoleBinding's removal", time.Now(), rcs, annLists(http.StatusForbidden))
	within(t, "a RoleBinding's removal", d, time.Second)
}
