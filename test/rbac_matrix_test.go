package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// matrixWidgetCRD is a namespaced kind with the status and scale
// subresources.
var matrixWidgetCRD = testsupport.CRD{
	Kind: "Widget", Status: true,
	Scale: `{specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}`,
}.String()

// matrixGadgetCRD is the kind the plugins installed in the matrix admit:
// no other request writes it.
var matrixGadgetCRD = testsupport.CRD{Kind: "Gadget"}.String()

// matrixPolicy is the RBAC the matrix runs under, as an administrator
// writes it: ClusterRoles that aggregate widgets into view and edit, ed
// editing namespace a, vi viewing everything, ro reading widgets in b and
// writing only their status, the users who may write Roles and
// RoleBindings in b (ro, binder, esc), binder with bind on edit, esc with
// escalate, and pi who may install plugins and views everything.
const matrixPolicy = `
apiVersion: v1
kind: Namespace
metadata: {name: a}
---
apiVersion: v1
kind: Namespace
metadata: {name: b}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-view
  labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules:
- apiGroups: [example.setpoint.dev]
  resources: [widgets, widgets/status, widgets/scale, gadgets]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-edit
  labels: {rbac.authorization.k8s.io/aggregate-to-edit: "true"}
rules:
- apiGroups: [example.setpoint.dev]
  resources: [widgets, widgets/scale]
  verbs: [create, update, patch, delete, deletecollection]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ed-edit, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{kind: User, name: ed}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: viewers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: User, name: vi}, {kind: User, name: pi}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: widget-reader, namespace: b}
rules:
- apiGroups: [example.setpoint.dev]
  resources: [widgets]
  verbs: [get, list, watch]
- apiGroups: [example.setpoint.dev]
  resources: [widgets/status]
  verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ro-widget-reader, namespace: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: widget-reader}
subjects: [{kind: User, name: ro}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: rbac-writer, namespace: b}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: rbac-writers, namespace: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: rbac-writer}
subjects: [{kind: User, name: ro}, {kind: User, name: binder}, {kind: User, name: esc}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: edit-binder, namespace: b}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  resourceNames: [edit]
  verbs: [bind]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: edit-binder, namespace: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: edit-binder}
subjects: [{kind: User, name: binder}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: escalator, namespace: b}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles]
  verbs: [escalate]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: escalator, namespace: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: escalator}
subjects: [{kind: User, name: esc}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: plugin-installer}
rules:
- apiGroups: [setpoint.dev]
  resources: [plugins]
  verbs: [create, get, list, watch]
- apiGroups: [setpoint.dev]
  resources: [modules]
  verbs: [create, get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: plugin-installer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: plugin-installer}
subjects: [{kind: User, name: pi}]
`

// matrixWidgets are the widgets the real requests act on: w1 in a and b,
// and dc1 (labelled for the deletecollections) in both.
const matrixWidgets = `
apiVersion: example.setpoint.dev/v1
kind: Widget
metadata: {name: w1, namespace: a}
spec: {replicas: 1}
---
apiVersion: example.setpoint.dev/v1
kind: Widget
metadata: {name: w1, namespace: b}
spec: {replicas: 1}
---
apiVersion: example.setpoint.dev/v1
kind: Widget
metadata: {name: dc1, namespace: a, labels: {dc: "yes"}}
spec: {replicas: 1}
---
apiVersion: example.setpoint.dev/v1
kind: Widget
metadata: {name: dc1, namespace: b, labels: {dc: "yes"}}
spec: {replicas: 1}
`

// matrixWidget is a Widget manifest for kubectl create and replace.
func matrixWidget(ns, name string, replicas int) string {
	return fmt.Sprintf("apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: %s, namespace: %s}\nspec: {replicas: %d}\n", name, ns, replicas)
}

var (
	matrixUsers = []string{"admin", "ed", "vi", "ro", "none"}
	matrixVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	// matrixScopes are the namespaces asked about; "" is cluster-wide.
	matrixScopes = []string{"a", "b", ""}
	matrixSubs   = []string{"", "status", "scale"}
)

// matrixAccess is one cell of the matrix.
type matrixAccess struct{ user, verb, ns, sub string }

func (a matrixAccess) String() string {
	res := "widgets"
	if a.sub != "" {
		res += "/" + a.sub
	}
	ns := a.ns
	if ns == "" {
		ns = "(all)"
	}
	return fmt.Sprintf("%s %s %s in %s", a.user, a.verb, res, ns)
}

// wantAllowed is what Kubernetes' RBAC answers under matrixPolicy.
func wantAllowed(a matrixAccess) bool {
	read := a.verb == "get" || a.verb == "list" || a.verb == "watch"
	switch a.user {
	case "admin":
		return true
	case "vi":
		return read
	case "ed":
		// edit holds view's reads and widgets-edit's writes, which leave
		// out the status.
		return a.ns == "a" && (read || a.sub != "status")
	case "ro":
		return a.ns == "b" && (read && a.sub == "" || a.verb == "update" && a.sub == "status")
	}
	return false
}

// matrixServer is the server and the users the matrix runs.
type matrixServer struct {
	s      *testserver.Server
	kc     map[string]string // user -> kubeconfig
	tokens map[string]string // user -> bearer token
	sem    chan struct{}     // bounds the kubectl runs at once
}

// kubectl runs kubectl as user, with stdin when not empty.
func (m *matrixServer) kubectl(user, stdin string, args ...string) (string, string, error) {
	m.sem <- struct{}{}
	defer func() { <-m.sem }()
	return m.s.KubectlInput(stdin, append([]string{"--kubeconfig", m.kc[user]}, args...)...)
}

// canI asks `kubectl auth can-i` as user (and as whom --as names).
func (m *matrixServer) canI(a matrixAccess, as ...string) (bool, error) {
	args := []string{"auth", "can-i", a.verb, "widgets.example.setpoint.dev"}
	if a.ns == "" {
		args = append(args, "--all-namespaces")
	} else {
		args = append(args, "-n", a.ns)
	}
	if a.sub != "" {
		args = append(args, "--subresource", a.sub)
	}
	args = append(args, as...)
	out, errOut, err := m.kubectl(a.user, "", args...)
	switch strings.TrimSpace(out) {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, fmt.Errorf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
}

// do sends a request as user with the token in the Authorization header
// and returns the status code and body; the body of a watch that opened
// (200) is left unread.
func (m *matrixServer) do(ctx context.Context, user, method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, m.s.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.tokens[user])
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	c := m.s.HTTPClient()
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && req.URL.Query().Get("watch") == "true" {
		return resp.StatusCode, nil, nil // a watch that opened: stop there
	}
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), err
}

// realCase is a real request whose answer must match the matrix: kubectl
// args (with stdin) or, for what kubectl does not send, call.
type realCase struct {
	matrixAccess
	args  []string
	stdin string
	// input, when set, makes stdin just before the request.
	input func() (string, error)
	call  func() error
	// refusal, when set, is what kubectl's 403 must say.
	refusal string
}

// run makes the request and tells whether it was allowed; any failure but
// a 403 fails t.
func (m *matrixServer) run(t *testing.T, c realCase) bool {
	t.Helper()
	if c.call != nil {
		err := c.call()
		if err != nil && !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v", c.matrixAccess, err)
		}
		return err == nil
	}
	if c.input != nil {
		in, err := c.input()
		if err != nil {
			t.Errorf("%s: %v", c.matrixAccess, err)
			return false
		}
		c.stdin = in
	}
	out, errOut, err := m.kubectl(c.user, c.stdin, c.args...)
	if err != nil && (!strings.Contains(errOut, "(Forbidden)") || !strings.Contains(errOut, c.refusal)) {
		t.Errorf("%s: kubectl %s: %v\n%s%s; want a 403 saying %q", c.matrixAccess, strings.Join(c.args, " "), err, out, errOut, c.refusal)
	}
	return err == nil
}

// TestRBACMatrix runs one server with a token file of users and RBAC as
// an administrator writes it, and checks with the real kubectl what each
// user may do to a custom resource and its status and scale subresources
// in two namespaces and cluster-wide: every cell of the matrix with
// `kubectl auth can-i` against Kubernetes' answer, real requests (each
// verb allowed and denied at least once) against the same cells, watches
// over HTTP and WebSocket, module upload and Plugin install (no
// escalation through a plugin), escalation through Roles and bindings,
// impersonation, and the audit log's record of several of them.
func TestRBACMatrix(t *testing.T) {
	start := time.Now()
	dir := t.TempDir()
	tokens := map[string]string{}
	var csv strings.Builder
	for _, u := range []string{"ed", "vi", "ro", "none", "binder", "esc", "pi"} {
		tokens[u] = "matrix-" + u + "-token-0123456789"
		fmt.Fprintf(&csv, "%s,%s,uid-%s\n", tokens[u], u, u)
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	policyFile := filepath.Join(dir, "policy.yaml")
	for path, data := range map[string]string{tokenFile: csv.String(), policyFile: `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/api", "/api/*", "/apis", "/apis/*", "/openapi/*"]
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: Metadata
`} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	log := auditDir{dir: dir, path: filepath.Join(dir, "audit.log")}
	s := testserver.Start(t, testserver.Options{Args: []string{
		"--token-auth-file", tokenFile, "--audit-policy-file", policyFile, "--audit-log-path", log.path,
	}})
	labels := wasmModule(t, "requiredlabels")
	m := &matrixServer{s: s, kc: map[string]string{"admin": s.Kubeconfig}, tokens: tokens, sem: make(chan struct{}, 8)}
	m.tokens["admin"] = s.Token
	for u, tok := range tokens {
		if u != "admin" {
			m.kc[u] = tokenKubeconfig(t, s, u, tok)
		}
	}
	mustKubectl := func(user, stdin string, args ...string) string {
		t.Helper()
		out, errOut, err := m.kubectl(user, stdin, args...)
		if err != nil {
			t.Fatalf("kubectl %s as %s: %v\n%s%s", strings.Join(args, " "), user, err, out, errOut)
		}
		return out
	}
	mustKubectl("admin", matrixPolicy+"\n---\n"+matrixWidgetCRD+"\n---\n"+matrixGadgetCRD, "apply", "-f", "-")
	mustKubectl("admin", matrixWidgets, "apply", "-f", "-")

	// Aggregation makes view and edit cover widgets, and the bindings reach
	// the authorizer's cache: wait for the last of each.
	testsupport.Poll(t, 20*time.Second, "view and edit aggregating widgets", func() (bool, string) {
		view := mustKubectl("admin", "", "get", "clusterrole", "view", "-o", "jsonpath={.rules[*].resources}")
		edit := mustKubectl("admin", "", "get", "clusterrole", "edit", "-o", "jsonpath={.rules[*].resources}")
		return strings.Contains(view, "widgets/scale") && strings.Count(edit, "widgets/scale") == 2, fmt.Sprintf("view %s; edit %s", view, edit)
	})
	for _, a := range []matrixAccess{{"ed", "deletecollection", "a", "scale"}, {"vi", "watch", "", ""}, {"ro", "update", "b", "status"}} {
		testsupport.Poll(t, 20*time.Second, a.String(), func() (bool, string) {
			ok, err := m.canI(a)
			return ok, fmt.Sprint(err)
		})
	}
	testsupport.Poll(t, 20*time.Second, "esc may escalate", func() (bool, string) {
		out, _, _ := m.kubectl("esc", "", "auth", "can-i", "escalate", "roles.rbac.authorization.k8s.io", "-n", "b")
		return strings.TrimSpace(out) == "yes", out
	})
	t.Logf("setup: %v", time.Since(start).Round(time.Millisecond))

	// Everything below runs at once: the matrix, the real requests (in
	// lanes, each in order) and the other cases.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex // guards the maps below
		canI    = map[matrixAccess]bool{}
		canIAs  = map[matrixAccess]bool{} // the admin's answers --as vi
		real    = map[*realCase]bool{}
		cellErr = func(err error) { t.Error(err) }
	)
	for _, u := range matrixUsers {
		for _, v := range matrixVerbs {
			for _, ns := range matrixScopes {
				for _, sub := range matrixSubs {
					a := matrixAccess{u, v, ns, sub}
					wg.Go(func() {
						ok, err := m.canI(a)
						if err != nil {
							cellErr(err)
							return
						}
						mu.Lock()
						canI[a] = ok
						mu.Unlock()
					})
					if u == "vi" && sub == "" {
						wg.Go(func() {
							ok, err := m.canI(matrixAccess{"admin", v, ns, sub}, "--as", "vi")
							if err != nil {
								cellErr(err)
								return
							}
							mu.Lock()
							canIAs[a] = ok
							mu.Unlock()
						})
					}
				}
			}
		}
	}

	lanes := m.realLanes()
	for _, lane := range lanes {
		wg.Go(func() {
			for _, c := range lane {
				ok := m.run(t, *c)
				mu.Lock()
				real[c] = ok
				mu.Unlock()
			}
		})
	}
	wg.Go(func() { m.watches(t) })
	wg.Go(func() { m.plugins(t, labels) })
	wg.Go(func() { m.escalation(t) })
	wg.Go(func() { m.impersonation(t) })
	wg.Wait()
	t.Logf("matrix, requests and cases: %v", time.Since(start).Round(time.Millisecond))

	for a, ok := range canI {
		if want := wantAllowed(a); ok != want {
			t.Errorf("kubectl auth can-i: %s: %v, want %v", a, ok, want)
		}
	}
	if n := len(matrixUsers) * len(matrixVerbs) * len(matrixScopes) * len(matrixSubs); len(canI) != n {
		t.Errorf("%d of %d cells answered", len(canI), n)
	}
	for a, ok := range canIAs {
		if ok != canI[a] {
			t.Errorf("kubectl auth can-i --as vi as the admin: %s: %v, vi's own answer %v", a, ok, canI[a])
		}
	}
	allowed, denied := map[string]bool{}, map[string]bool{}
	for _, lane := range lanes {
		for _, c := range lane {
			ok := real[c]
			if want := wantAllowed(c.matrixAccess); ok != want || ok != canI[c.matrixAccess] {
				t.Errorf("%s (%s): allowed %v; can-i %v, want %v", c.matrixAccess, strings.Join(c.args, " "), ok, canI[c.matrixAccess], want)
			}
			if ok {
				allowed[c.verb] = true
			} else {
				denied[c.verb] = true
			}
		}
	}
	for _, v := range matrixVerbs {
		if !allowed[v] || !denied[v] {
			t.Errorf("the real requests have %s allowed %v, denied %v; want both", v, allowed[v], denied[v])
		}
	}

	checkMatrixAudit(t, log)
	t.Logf("total: %v", time.Since(start).Round(time.Millisecond))
}

// realLanes are the real requests, in lanes whose requests run in order.
func (m *matrixServer) realLanes() [][]*realCase {
	k := func(user, verb, ns, sub, stdin string, args ...string) *realCase {
		return &realCase{matrixAccess: matrixAccess{user, verb, ns, sub}, args: args, stdin: stdin}
	}
	refusing := func(c *realCase, msg string) *realCase {
		c.refusal = msg
		return c
	}
	widgets := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}
	deleteCollection := func(user, ns string) *realCase {
		return &realCase{matrixAccess: matrixAccess{user, "deletecollection", ns, ""}, call: func() error {
			cfg, err := clientcmd.BuildConfigFromFlags("", m.kc[user])
			if err != nil {
				return err
			}
			dc, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			return dc.Resource(widgets).Namespace(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "dc=yes"})
		}}
	}
	watch := func(user, ns string) *realCase {
		return &realCase{matrixAccess: matrixAccess{user, "watch", ns, ""}, call: func() error {
			path := "/apis/example.setpoint.dev/v1/widgets?watch=true"
			if ns != "" {
				path = "/apis/example.setpoint.dev/v1/namespaces/" + ns + "/widgets?watch=true"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			code, body, err := m.do(ctx, user, http.MethodGet, path, "", nil)
			switch {
			case err != nil:
				return err
			case code == http.StatusForbidden:
				return apierrors.NewForbidden(widgets.GroupResource(), "", fmt.Errorf("%s", body))
			case code != http.StatusOK:
				return fmt.Errorf("watch %s: %d %s", path, code, body)
			}
			return nil
		}}
	}
	// ro may not get the status, from which kubectl replace would read the
	// resourceVersion: it is read from the widget.
	roStatus := k("ro", "update", "b", "status", "", "replace", "--subresource", "status", "-f", "-")
	roStatus.input = func() (string, error) {
		rv, errOut, err := m.kubectl("ro", "", "get", "widget", "w1", "-n", "b", "-o", "jsonpath={.metadata.resourceVersion}")
		if err != nil {
			return "", fmt.Errorf("kubectl get as ro: %v\n%s", err, errOut)
		}
		return fmt.Sprintf("apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: b, resourceVersion: %q}\nspec: {replicas: 1}\nstatus: {replicas: 1}\n", rv), nil
	}
	return [][]*realCase{
		{ // ed edits namespace a, and nothing else
			k("ed", "create", "a", "", matrixWidget("a", "ed1", 1), "create", "-f", "-"),
			k("ed", "get", "a", "", "", "get", "widget", "ed1", "-n", "a"),
			k("ed", "patch", "a", "", "", "patch", "widget", "ed1", "-n", "a", "--type", "merge", "-p", `{"spec":{"replicas":2}}`),
			k("ed", "update", "a", "", matrixWidget("a", "ed1", 2), "replace", "-f", "-"),
			k("ed", "patch", "a", "scale", "", "patch", "widget", "ed1", "-n", "a", "--subresource", "scale", "--type", "merge", "-p", `{"spec":{"replicas":3}}`),
			k("ed", "patch", "a", "status", "", "patch", "widget", "ed1", "-n", "a", "--subresource", "status", "--type", "merge", "-p", `{"status":{"replicas":3}}`),
			k("ed", "delete", "a", "", "", "delete", "widget", "ed1", "-n", "a", "--wait=false"),
			k("ed", "get", "b", "", "", "get", "widget", "w1", "-n", "b"),
			refusing(k("ed", "list", "", "", "", "get", "widgets", "--all-namespaces"),
				`User "ed" cannot list resource "widgets" in API group "example.setpoint.dev" at the cluster scope`),
			deleteCollection("ed", "a"),
		},
		{ // vi reads everything, and writes nothing
			k("vi", "get", "a", "", "", "get", "widget", "w1", "-n", "a"),
			k("vi", "list", "", "", "", "get", "widgets", "--all-namespaces"),
			k("vi", "get", "a", "scale", "", "get", "widget", "w1", "-n", "a", "--subresource", "scale"),
			k("vi", "get", "b", "status", "", "get", "widget", "w1", "-n", "b", "--subresource", "status"),
			k("vi", "create", "a", "", matrixWidget("a", "vi1", 1), "create", "-f", "-"),
			k("vi", "patch", "a", "", "", "patch", "widget", "w1", "-n", "a", "--type", "merge", "-p", `{"spec":{"replicas":2}}`),
			k("vi", "update", "a", "", matrixWidget("a", "w1", 2), "replace", "-f", "-"),
			k("vi", "patch", "a", "scale", "", "patch", "widget", "w1", "-n", "a", "--subresource", "scale", "--type", "merge", "-p", `{"spec":{"replicas":3}}`),
			k("vi", "delete", "b", "", "", "delete", "widget", "w1", "-n", "b", "--wait=false"),
			deleteCollection("vi", "b"),
			watch("vi", "a"),
			watch("vi", ""),
		},
		{ // ro reads widgets in b and writes their status only
			k("ro", "list", "b", "", "", "get", "widgets", "-n", "b"),
			k("ro", "get", "b", "", "", "get", "widget", "w1", "-n", "b"),
			roStatus,
			refusing(k("ro", "get", "b", "status", "", "get", "widget", "w1", "-n", "b", "--subresource", "status"),
				`User "ro" cannot get resource "widgets/status" in API group "example.setpoint.dev" in the namespace "b"`),
			k("ro", "patch", "b", "status", "", "patch", "widget", "w1", "-n", "b", "--subresource", "status", "--type", "merge", "-p", `{"status":{"replicas":2}}`),
			k("ro", "update", "b", "", matrixWidget("b", "w1", 2), "replace", "-f", "-"),
			k("ro", "create", "b", "", matrixWidget("b", "ro1", 1), "create", "-f", "-"),
			k("ro", "delete", "b", "", "", "delete", "widget", "w1", "-n", "b", "--wait=false"),
			k("ro", "list", "a", "", "", "get", "widgets", "-n", "a"),
			watch("ro", "b"),
			watch("ro", ""),
		},
		{ // none may do nothing
			k("none", "get", "a", "", "", "get", "widget", "w1", "-n", "a"),
			k("none", "list", "", "", "", "get", "widgets", "--all-namespaces"),
			k("none", "create", "b", "", matrixWidget("b", "none1", 1), "create", "-f", "-"),
			watch("none", "a"),
		},
		{ // the admin may do anything
			deleteCollection("admin", "b"),
			watch("admin", ""),
		},
	}
}

// stdoutLines streams the lines cmd writes on stdout.
func stdoutLines(cmd *exec.Cmd) (<-chan string, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch, nil
}

// watches opens watches over HTTP with kubectl get --watch and over
// WebSocket: vi's open and see a new widget, none's are refused when
// opened.
func (m *matrixServer) watches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := m.s.Command(ctx, testserver.Kubectl, "--kubeconfig", m.kc["vi"], "get", "widgets", "-n", "a", "--watch", "-o", "name")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	seen, err := stdoutLines(cmd)
	if err != nil {
		t.Error(err)
		return
	}
	if err := cmd.Start(); err != nil {
		t.Error(err)
		return
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	c, resp, err := wsDial(m.s, "/apis/example.setpoint.dev/v1/namespaces/a/widgets", nil, nil, wsTokenProtocol(m.tokens["vi"]), wsProtocol)
	if err != nil {
		t.Errorf("vi's WebSocket watch: %v (%v)", err, resp)
		return
	}
	defer c.Close()
	// Listed first, then watched: the watch sees a widget created after.
	var got []string
	created, saw := false, false
	for line := range seen {
		got = append(got, line)
		switch {
		case line == "widget.example.setpoint.dev/w1" && !created:
			created = true
			// (Not queued behind the matrix's kubectl runs.)
			if out, errOut, err := m.s.KubectlInput(matrixWidget("a", "watched", 1), "create", "-f", "-"); err != nil {
				t.Errorf("kubectl create: %v\n%s%s", err, out, errOut)
				return
			}
		case line == "widget.example.setpoint.dev/watched":
			saw = true
		}
		if saw {
			break
		}
	}
	if !saw {
		cancel()
		_ = cmd.Wait()
		t.Errorf("kubectl get --watch as vi did not see the new widget: %q\n%s", got, errOut.String())
	}
	for {
		ev, err := readWSEvent(c, 20*time.Second)
		if err != nil {
			t.Errorf("vi's WebSocket watch: %v", err)
			break
		}
		if ev.Type == "ADDED" && ev.Object.Metadata.Name == "watched" {
			break
		}
	}

	if out, errOut, err := m.kubectl("none", "", "get", "widgets", "-n", "a", "--watch"); err == nil || !strings.Contains(errOut, "(Forbidden)") {
		t.Errorf("kubectl get --watch as none: %v\n%s%s, want Forbidden", err, out, errOut)
	}
	c, resp, err = wsDial(m.s, "/apis/example.setpoint.dev/v1/namespaces/a/widgets", nil, http.Header{"User-Agent": {"matrix-ws"}}, wsTokenProtocol(m.tokens["none"]), wsProtocol)
	if err == nil {
		c.Close()
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("none's WebSocket watch: %v (%v), want 403 at open", err, resp)
	}
}

// plugins uploads modules and installs Plugins: ed holds no grant on
// either, the admin holds everything, and pi, who may create Plugins and
// modules and views everything, may install a plugin that only reads but
// not one that writes.
func (m *matrixServer) plugins(t *testing.T, wasmPath string) {
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		t.Error(err)
		return
	}
	sum := sha256.Sum256(wasm)
	path := "/apis/setpoint.dev/v1alpha1/modules?digest=sha256:" + hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		user string
		want []int
	}{{"ed", []int{http.StatusForbidden}}, {"admin", []int{http.StatusOK, http.StatusCreated}}, {"pi", []int{http.StatusOK, http.StatusCreated}}} {
		code, body, err := m.do(context.Background(), tc.user, http.MethodPost, path, "application/wasm", wasm)
		if err != nil || !slices.Contains(tc.want, code) {
			t.Errorf("module upload as %s: %d %.300s %v, want %v", tc.user, code, body, err, tc.want)
		}
	}
	if code, body, err := m.do(context.Background(), "ed", http.MethodDelete, "/apis/setpoint.dev/v1alpha1/modules/sha256:"+hex.EncodeToString(sum[:]), "", nil); err != nil || code != http.StatusForbidden {
		t.Errorf("module delete as ed: %d %.300s %v, want 403", code, body, err)
	}
	for _, tc := range []struct {
		user, name string
		extra      []string
		want       string // in stderr; "" for success
	}{
		{"ed", "ed-gadgets", nil, "forbidden"},
		{"admin", "admin-gadgets", nil, ""},
		{"pi", "pi-writer", []string{"--permissions", "write=gadgets"}, "is attempting to install a plugin with permissions not currently held"},
		{"pi", "pi-gadgets", nil, ""},
	} {
		args := append([]string{"plugin", "install", tc.name, "--wasm", wasmPath, "--admit", "gadgets", "--kubeconfig", m.kc[tc.user]}, tc.extra...)
		m.sem <- struct{}{}
		out, errOut, err := m.s.Setpoint(args...)
		<-m.sem
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(errOut, tc.want)) {
			t.Errorf("setpoint plugin install %s as %s: %v\n%s%s; want %q", tc.name, tc.user, err, out, errOut, tc.want)
		}
	}
	if _, errOut, err := m.kubectl("admin", "", "get", "plugin", "pi-writer"); err == nil || !strings.Contains(errOut, "NotFound") {
		t.Errorf("the refused Plugin exists: %v %s", err, errOut)
	}
}

// escalation creates Roles and RoleBindings in b: ro, who may create them,
// may grant what it holds but no more, and may not bind edit; binder, with
// bind on edit, may bind edit but not admin; esc, with escalate, may create
// a broader Role but not bind edit.
func (m *matrixServer) escalation(t *testing.T) {
	const refused = "is attempting to grant RBAC permissions not currently held"
	for _, tc := range []struct {
		user string
		args []string
		want string // in stderr; "" for success
	}{
		{"ro", []string{"create", "role", "narrower", "--verb=get,list", "--resource=widgets"}, ""},
		{"ro", []string{"create", "role", "wider", "--verb=get,delete", "--resource=widgets"}, refused},
		{"ro", []string{"create", "rolebinding", "ro-edit", "--clusterrole=edit", "--user=ro"}, refused},
		{"binder", []string{"create", "rolebinding", "binder-edit", "--clusterrole=edit", "--user=binder"}, ""},
		{"binder", []string{"create", "rolebinding", "binder-admin", "--clusterrole=admin", "--user=binder"}, refused},
		{"esc", []string{"create", "role", "broader", "--verb=*", "--resource=widgets,widgets/status"}, ""},
		{"esc", []string{"create", "rolebinding", "esc-edit", "--clusterrole=edit", "--user=esc"}, refused},
	} {
		out, errOut, err := m.kubectl(tc.user, "", append(tc.args, "-n", "b")...)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(errOut, tc.want)) {
			t.Errorf("kubectl %s as %s: %v\n%s%s; want %q", strings.Join(tc.args, " "), tc.user, err, out, errOut, tc.want)
		}
	}
	// binder now holds edit in b.
	if out, _, _ := m.kubectl("binder", "", "auth", "can-i", "delete", "widgets.example.setpoint.dev", "-n", "b"); strings.TrimSpace(out) != "yes" {
		testsupport.Poll(t, 20*time.Second, "binder's edit in b", func() (bool, string) {
			out, _, _ := m.kubectl("binder", "", "auth", "can-i", "delete", "widgets.example.setpoint.dev", "-n", "b")
			return strings.TrimSpace(out) == "yes", out
		})
	}
}

// impersonation acts as vi: the admin may, and is held to vi's rights; ed
// may not.
func (m *matrixServer) impersonation(t *testing.T) {
	if out, errOut, err := m.kubectl("admin", "", "get", "widgets", "-n", "a", "--as", "vi", "-o", "name"); err != nil || !strings.Contains(out, "widget.example.setpoint.dev/w1") {
		t.Errorf("kubectl get widgets --as vi as the admin: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := m.kubectl("admin", "", "delete", "widget", "w1", "-n", "a", "--as", "vi", "--wait=false"); err == nil ||
		!strings.Contains(errOut, `User "vi" cannot delete resource "widgets" in API group "example.setpoint.dev" in the namespace "a"`) {
		t.Errorf("kubectl delete --as vi as the admin: %v\n%s%s; want vi's 403", err, out, errOut)
	}
	if out, errOut, err := m.kubectl("ed", "", "get", "widgets", "-n", "a", "--as", "vi"); err == nil ||
		!strings.Contains(errOut, `User "ed" cannot impersonate resource "users" in API group "" at the cluster scope`) {
		t.Errorf("kubectl get --as vi as ed: %v\n%s%s; want the impersonation 403", err, out, errOut)
	}
}

// checkMatrixAudit finds the audit events of several cases above.
func checkMatrixAudit(t *testing.T, log auditDir) {
	var events []auditv1.Event // the log as last read, nil to read it again
	ref := func(ev auditv1.Event, resource, ns, name, sub string) bool {
		r := ev.ObjectRef
		return r != nil && r.Resource == resource && r.Namespace == ns && r.Name == name && r.Subresource == sub
	}
	for _, tc := range []struct {
		name     string
		match    func(auditv1.Event) bool
		code     int32
		decision string // "" when there is none to check
	}{
		{"none gets a/w1", func(ev auditv1.Event) bool {
			return ev.User.Username == "none" && ev.Verb == "get" && ref(ev, "widgets", "a", "w1", "")
		}, http.StatusForbidden, "forbid"},
		{"ed creates a/ed1", func(ev auditv1.Event) bool {
			return ev.User.Username == "ed" && ev.Verb == "create" && ref(ev, "widgets", "a", "ed1", "")
		}, http.StatusCreated, "allow"},
		{"ro updates b/w1's status", func(ev auditv1.Event) bool {
			return ev.User.Username == "ro" && ev.Verb == "update" && ref(ev, "widgets", "b", "w1", "status")
		}, http.StatusOK, "allow"},
		{"vi lists every widget", func(ev auditv1.Event) bool {
			return ev.User.Username == "vi" && ev.Verb == "list" && ref(ev, "widgets", "", "", "")
		}, http.StatusOK, "allow"},
		{"the admin as vi deletes a/w1", func(ev auditv1.Event) bool {
			return ev.User.Username == adminUser && ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username == "vi" &&
				ev.Verb == "delete" && ref(ev, "widgets", "a", "w1", "")
		}, http.StatusForbidden, "forbid"},
		{"ed as vi lists a", func(ev auditv1.Event) bool {
			return ev.User.Username == "ed" && ev.Verb == "list" && ref(ev, "widgets", "a", "", "") && ev.ResponseStatus != nil && ev.ResponseStatus.Code == http.StatusForbidden
		}, http.StatusForbidden, ""},
		{"none's WebSocket watch", func(ev auditv1.Event) bool {
			return ev.User.Username == "none" && ev.UserAgent == "matrix-ws" && ev.Verb == "watch" && ref(ev, "widgets", "a", "", "")
		}, http.StatusForbidden, "forbid"},
		{"ed uploads a module", func(ev auditv1.Event) bool {
			return ev.User.Username == "ed" && ev.Verb == "create" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "modules"
		}, http.StatusForbidden, "forbid"},
		{"pi installs a plugin that writes", func(ev auditv1.Event) bool {
			return ev.User.Username == "pi" && ev.Verb == "create" && ref(ev, "plugins", "", "pi-writer", "")
		}, http.StatusForbidden, "allow"}, // authorized, refused in admission
		{"ro creates a wider Role", func(ev auditv1.Event) bool {
			return ev.User.Username == "ro" && ev.Verb == "create" && ref(ev, "roles", "b", "wider", "")
		}, http.StatusForbidden, "allow"},
	} {
		var found *auditv1.Event
		testsupport.Poll(t, 20*time.Second, "the audit event: "+tc.name, func() (bool, string) {
			if events == nil {
				events = log.events(t)
			}
			for i := range events {
				if ev := &events[i]; ev.Stage == auditv1.StageResponseComplete && tc.match(*ev) {
					found = ev
					return true, ""
				}
			}
			events = nil // read the log again
			return false, "not in the log yet"
		})
		ev := found
		if ev.Level != auditv1.LevelMetadata || ev.ResponseStatus == nil || ev.ResponseStatus.Code != tc.code ||
			tc.decision != "" && ev.Annotations["authorization.k8s.io/decision"] != tc.decision {
			t.Errorf("%s: level %s status %+v annotations %v; want %d, decision %q", tc.name, ev.Level, ev.ResponseStatus, ev.Annotations, tc.code, tc.decision)
		}
	}
}
