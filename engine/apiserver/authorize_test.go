package apiserver

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	endpointsrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// rule is one rule of rulesAuthorizer: verbs on resources of groups (or
// nonResourceURLs) in a namespace ("" everywhere), "*" matching all.
type rule struct {
	verbs, groups, resources, urls []string
	namespace                      string
}

func matches(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

// rulesAuthorizer is a small stand-in for RBAC: it allows what the rules of
// the user's name or of one of its groups allow, and lists them as a
// RuleResolver.
type rulesAuthorizer struct {
	authorizer.AuthorizerFunc
	mu    sync.RWMutex
	rules map[string][]rule // by user name or group; guarded by mu
}

var _ authorizer.RuleResolver = (*rulesAuthorizer)(nil)

func newRulesAuthorizer(rules map[string][]rule) *rulesAuthorizer {
	a := &rulesAuthorizer{rules: maps.Clone(rules)}
	a.AuthorizerFunc = a.authorize
	return a
}

// setRules replaces the rules of a user or group, as a role granted or
// taken away does.
func (a *rulesAuthorizer) setRules(name string, rules []rule) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rules[name] = rules
}

func (a *rulesAuthorizer) applicable(u user.Info) []rule {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := slices.Clone(a.rules[u.GetName()])
	for _, g := range u.GetGroups() {
		out = append(out, a.rules[g]...)
	}
	return out
}

func (a *rulesAuthorizer) authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	for _, r := range a.applicable(attrs.GetUser()) {
		if !matches(r.verbs, attrs.GetVerb()) {
			continue
		}
		if !attrs.IsResourceRequest() {
			if slices.ContainsFunc(r.urls, func(u string) bool {
				return u == attrs.GetPath() || strings.HasSuffix(u, "*") && strings.HasPrefix(attrs.GetPath(), strings.TrimSuffix(u, "*"))
			}) {
				return authorizer.DecisionAllow, "", nil
			}
			continue
		}
		res := attrs.GetResource()
		if attrs.GetSubresource() != "" {
			res += "/" + attrs.GetSubresource()
		}
		if matches(r.groups, attrs.GetAPIGroup()) && matches(r.resources, res) && (r.namespace == "" || r.namespace == attrs.GetNamespace()) {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (a *rulesAuthorizer) RulesFor(_ context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	var res []authorizer.ResourceRuleInfo
	var nonRes []authorizer.NonResourceRuleInfo
	for _, r := range a.applicable(u) {
		if len(r.urls) > 0 {
			nonRes = append(nonRes, &authorizer.DefaultNonResourceRuleInfo{Verbs: r.verbs, NonResourceURLs: r.urls})
		} else if r.namespace == "" || r.namespace == namespace {
			res = append(res, &authorizer.DefaultResourceRuleInfo{Verbs: r.verbs, APIGroups: r.groups, Resources: r.resources})
		}
	}
	return res, nonRes, false, nil
}

// testRules are Kubernetes' default roles for every authenticated user
// (system:basic-user, system:discovery) and for system:masters
// (cluster-admin), and a few users: ann works with widgets in namespace a
// (but may not delete them), and may only get and patch them in b; rev
// reviews others; rita reads widgets in a.
var testRules = map[string][]rule{
	user.SystemPrivilegedGroup: {
		{verbs: []string{"*"}, groups: []string{"*"}, resources: []string{"*"}},
		{verbs: []string{"*"}, urls: []string{"*"}},
	},
	user.AllAuthenticated: {
		{verbs: []string{"create"}, groups: []string{"authorization.k8s.io"}, resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
		{verbs: []string{"create"}, groups: []string{"authentication.k8s.io"}, resources: []string{"selfsubjectreviews"}},
		{verbs: []string{"get"}, urls: []string{"/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version"}},
	},
	"ann": {
		{verbs: []string{"get", "list", "watch", "create", "patch", "update"}, groups: []string{"example.setpoint.dev"}, resources: []string{"widgets"}, namespace: "a"},
		{verbs: []string{"get", "patch"}, groups: []string{"example.setpoint.dev"}, resources: []string{"widgets"}, namespace: "b"},
	},
	"rev": {
		{verbs: []string{"create"}, groups: []string{"authorization.k8s.io"}, resources: []string{"subjectaccessreviews", "localsubjectaccessreviews"}},
	},
	"rita": {
		{verbs: []string{"get", "list", "watch"}, groups: []string{"example.setpoint.dev"}, resources: []string{"widgets"}, namespace: "a"},
	},
}

// testTokens are the bearer tokens of the test users.
var testTokens = map[string]user.Info{
	"admin-token": serving.AdminUser,
	"ann-token":   &user.DefaultInfo{Name: "ann", UID: "ann-uid", Groups: []string{"team", user.AllAuthenticated}},
	"bob-token":   &user.DefaultInfo{Name: "bob", Groups: []string{user.AllAuthenticated}},
	"rev-token":   &user.DefaultInfo{Name: "rev", Groups: []string{user.AllAuthenticated}},
	"rita-token":  &user.DefaultInfo{Name: "rita", Groups: []string{user.AllAuthenticated}},
}

// authzServer is the API with a rulesAuthorizer, over TLS behind the
// serving layers that matter here: Instrument, a bearer-token
// authentication of testTokens and Authorize.
type authzServer struct {
	*httptest.Server
	api *Server
	az  *rulesAuthorizer
}

func newAuthzServer(t *testing.T) *authzServer { return newAuthzServerTLS(t, true) }

// wsTokenPrefix marks the WebSocket subprotocol that carries a bearer token.
const wsTokenPrefix = "base64url.bearer.authorization.k8s.io."

// newAuthzServerTLS is newAuthzServer over TLS or, for a browser, plain
// HTTP on loopback; the web UI's files are served without a token.
func newAuthzServerTLS(t *testing.T, useTLS bool) *authzServer {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	az := newRulesAuthorizer(testRules)
	eng, api := newTestAPI(t, db, Options{Authorizer: az})
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Go(func() { _ = eng.Run(ctx) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	authorized := serving.Authorize(api, az, log)
	authn := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		u, ok := testTokens[tok]
		if !ok {
			for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
				p = strings.TrimSpace(p)
				if tok, found := strings.CutPrefix(p, "token."); found {
					u, ok = testTokens[tok]
				}
				if enc, found := strings.CutPrefix(p, wsTokenPrefix); found {
					b, _ := base64.RawURLEncoding.DecodeString(enc)
					u, ok = testTokens[string(b)]
				}
			}
		}
		if !ok && strings.HasPrefix(r.URL.Path, "/ui") {
			api.ServeHTTP(w, r)
			return
		}
		if !ok {
			serving.WriteStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
			return
		}
		authorized.ServeHTTP(w, r.WithContext(endpointsrequest.WithUser(r.Context(), u)))
	})
	handler := serving.Instrument(authn, serving.InstrumentOptions{Logger: log})
	hs := httptest.NewUnstartedServer(handler)
	if useTLS {
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		loops.Wait()
		db.Close()
	})
	return &authzServer{Server: hs, api: api, az: az}
}

func (s *authzServer) do(t *testing.T, token string, rq request) (int, []byte) {
	t.Helper()
	if rq.method == "" {
		rq.method = http.MethodGet
	}
	req, err := http.NewRequest(rq.method, s.URL+rq.path, strings.NewReader(rq.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if rq.contentType == "" && rq.body != "" {
		rq.contentType = "application/json"
	}
	if rq.contentType != "" {
		req.Header.Set("Content-Type", rq.contentType)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (s *authzServer) mustDo(t *testing.T, token string, want int, rq request) []byte {
	t.Helper()
	code, b := s.do(t, token, rq)
	if code != want {
		t.Fatalf("%s %s with %s = %d %s, want %d", rq.method, rq.path, token, code, b, want)
	}
	return b
}

func (s *authzServer) clientset(t *testing.T, token string) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// setupWidgets registers the Widget kind and namespaces a and b.
func (s *authzServer) setupWidgets(t *testing.T) {
	t.Helper()
	s.mustDo(t, "admin-token", http.StatusCreated, request{method: "POST", path: crdPath, contentType: "application/yaml", body: readFile(t, "../../examples/widget/crd.yaml")})
	for _, ns := range []string{"a", "b"} {
		s.mustDo(t, "admin-token", http.StatusCreated, request{method: "POST", path: "/api/v1/namespaces", body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + ns + `"}}`})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := s.do(t, "admin-token", request{path: "/apis/example.setpoint.dev/v1/namespaces/a/widgets"})
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("widgets not served: %d", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func widgetsIn(ns string) string {
	return "/apis/example.setpoint.dev/v1/namespaces/" + ns + "/widgets"
}

func TestAuthorizedAPI(t *testing.T) {
	s := newAuthzServer(t)
	s.setupWidgets(t)
	const applyType = "application/apply-patch+yaml"
	applied := func(name string) string {
		return `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"` + name + `"},"spec":{"name":"W","size":"small"}}`
	}

	t.Run("a denied list reads as Kubernetes words it", func(t *testing.T) {
		b := s.mustDo(t, "ann-token", http.StatusForbidden, request{path: widgetsIn("b")})
		st := status(t, b)
		want := `widgets.example.setpoint.dev is forbidden: User "ann" cannot list resource "widgets" in API group "example.setpoint.dev" in the namespace "b"`
		if st.Message != want || st.Reason != metav1.StatusReasonForbidden || st.Details == nil || st.Details.Kind != "widgets" {
			t.Errorf("403: %+v; want message %q", st, want)
		}
		s.mustDo(t, "ann-token", http.StatusOK, request{path: widgetsIn("a")})
	})

	t.Run("server-side apply that creates needs create", func(t *testing.T) {
		// ann may patch in b but not create: applying a new widget there
		// is refused with nothing written, as kube-apiserver does.
		b := s.mustDo(t, "ann-token", http.StatusForbidden, request{method: "PATCH", path: widgetsIn("b") + "/w1?fieldManager=ann", contentType: applyType, body: applied("w1")})
		if st := status(t, b); !strings.Contains(st.Message, `User "ann" cannot create resource "widgets" in API group "example.setpoint.dev" in the namespace "b"`) {
			t.Errorf("apply create: %s", st.Message)
		}
		s.mustDo(t, "admin-token", http.StatusNotFound, request{path: widgetsIn("b") + "/w1"})
		// Dry run too.
		s.mustDo(t, "ann-token", http.StatusForbidden, request{method: "PATCH", path: widgetsIn("b") + "/w1?fieldManager=ann&dryRun=All", contentType: applyType, body: applied("w1")})
		// Once it exists, ann's apply updates it: patch is enough.
		s.mustDo(t, "admin-token", http.StatusCreated, request{method: "POST", path: widgetsIn("b"), body: applied("w1")})
		s.mustDo(t, "ann-token", http.StatusOK, request{method: "PATCH", path: widgetsIn("b") + "/w1?fieldManager=ann", contentType: applyType, body: applied("w1")})
		// In a, where ann may create, apply creates.
		s.mustDo(t, "ann-token", http.StatusCreated, request{method: "PATCH", path: widgetsIn("a") + "/w1?fieldManager=ann", contentType: applyType, body: applied("w1")})
		// bob may not even patch.
		s.mustDo(t, "bob-token", http.StatusForbidden, request{method: "PATCH", path: widgetsIn("a") + "/w1?fieldManager=bob", contentType: applyType, body: applied("w1")})
	})

	t.Run("watch over HTTP is checked when opened", func(t *testing.T) {
		b := s.mustDo(t, "ann-token", http.StatusForbidden, request{path: widgetsIn("b") + "?watch=true"})
		if st := status(t, b); !strings.Contains(st.Message, `cannot watch resource "widgets"`) {
			t.Errorf("watch: %s", st.Message)
		}
	})

	t.Run("watch over WebSocket is checked when opened", func(t *testing.T) {
		dialer := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, Subprotocols: []string{"token.ann-token", "setpoint.watch.v1"}}
		u := "wss" + strings.TrimPrefix(s.URL, "https") + widgetsIn("b") + "?watch=true"
		c, resp, err := dialer.Dial(u, nil)
		if err == nil {
			c.Close()
			t.Fatal("a WebSocket watch of b opened for ann")
		}
		if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("WebSocket watch of b: %v %v; want 403", resp, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `User \"ann\" cannot watch resource \"widgets\" in API group \"example.setpoint.dev\" in the namespace \"b\"`) {
			t.Errorf("403 body: %s", body)
		}
		s.mustDo(t, "admin-token", http.StatusCreated, request{method: "POST", path: widgetsIn("a"), body: applied("ws")})
		c, _, err = dialer.Dial("wss"+strings.TrimPrefix(s.URL, "https")+widgetsIn("a")+"?watch=true", nil)
		if err != nil {
			t.Fatalf("WebSocket watch of a: %v", err)
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, msg, err := c.ReadMessage()
		if err != nil || !strings.Contains(string(msg), `"ADDED"`) || !strings.Contains(string(msg), `"namespace":"a"`) {
			t.Errorf("first event of a: %s %v", msg, err)
		}
	})

	t.Run("access reviews with client-go", func(t *testing.T) {
		ctx := context.Background()
		sar := func(u, ns string) *authorizationv1.SubjectAccessReview {
			return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: u, Groups: []string{user.AllAuthenticated},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Group: "example.setpoint.dev", Resource: "widgets", Namespace: ns}}}
		}
		rev := s.clientset(t, "rev-token").AuthorizationV1()
		for _, tt := range []struct {
			user, ns string
			allowed  bool
		}{{"ann", "a", true}, {"ann", "b", false}, {"bob", "a", false}, {"setpoint-admin", "b", false}} {
			got, err := rev.SubjectAccessReviews().Create(ctx, sar(tt.user, tt.ns), metav1.CreateOptions{})
			if err != nil || got.Status.Allowed != tt.allowed {
				t.Errorf("SubjectAccessReview of %s in %s: %+v %v; want allowed %v", tt.user, tt.ns, got, err, tt.allowed)
			}
		}
		// The admin's groups are in the spec, not implied by the name.
		admin := sar("setpoint-admin", "b")
		admin.Spec.Groups = []string{user.SystemPrivilegedGroup}
		if got, err := rev.SubjectAccessReviews().Create(ctx, admin, metav1.CreateOptions{}); err != nil || !got.Status.Allowed {
			t.Errorf("SubjectAccessReview of system:masters: %+v %v", got, err)
		}
		local := &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: sar("ann", "a").Spec}
		if got, err := rev.LocalSubjectAccessReviews("a").Create(ctx, local, metav1.CreateOptions{}); err != nil || !got.Status.Allowed || got.Namespace != "a" {
			t.Errorf("LocalSubjectAccessReview of ann in a: %+v %v", got, err)
		}
		local.Spec.ResourceAttributes.Namespace = "b"
		if _, err := rev.LocalSubjectAccessReviews("a").Create(ctx, local, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
			t.Errorf("LocalSubjectAccessReview for b in a: %v; want 400", err)
		}
		noSubject := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get"}}}
		if _, err := rev.SubjectAccessReviews().Create(ctx, noSubject, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "at least one of user or group") {
			t.Errorf("SubjectAccessReview without a subject: %v", err)
		}
		// Creating a SubjectAccessReview needs create on them.
		_, err := s.clientset(t, "ann-token").AuthorizationV1().SubjectAccessReviews().Create(ctx, sar("bob", "a"), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "ann" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`) {
			t.Errorf("SubjectAccessReview by ann: %v; want 403", err)
		}
		// Self reviews answer for the caller.
		self := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "watch", Group: "example.setpoint.dev", Resource: "widgets", Namespace: "a"}}}
		if got, err := s.clientset(t, "ann-token").AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, self, metav1.CreateOptions{}); err != nil || !got.Status.Allowed {
			t.Errorf("SelfSubjectAccessReview of ann: %+v %v", got, err)
		}
		rules, err := s.clientset(t, "ann-token").AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
			&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "b"}}, metav1.CreateOptions{})
		if err != nil || rules.Status.Incomplete || !slices.ContainsFunc(rules.Status.ResourceRules, func(r authorizationv1.ResourceRule) bool {
			return slices.Equal(r.Verbs, []string{"get", "patch"}) && slices.Equal(r.Resources, []string{"widgets"})
		}) || len(rules.Status.NonResourceRules) != 1 {
			t.Errorf("SelfSubjectRulesReview of ann in b: %+v %v", rules, err)
		}
	})
}

func TestKubectlAuth(t *testing.T) {
	if _, err := os.Stat("/usr/bin/kubectl"); err != nil {
		t.Skip("no /usr/bin/kubectl")
	}
	s := newAuthzServer(t)
	s.setupWidgets(t)
	dir := t.TempDir()
	kubectl := func(token string, args ...string) (string, error) {
		kc := filepath.Join(dir, token+".kubeconfig")
		cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: %s\n    insecure-skip-tls-verify: true\ncontexts:\n- name: s\n  context:\n    cluster: s\n    user: u\n    namespace: a\nusers:\n- name: u\n  user:\n    token: %s\ncurrent-context: s\n", s.URL, token)
		if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/usr/bin/kubectl", append([]string{"--kubeconfig", kc, "--cache-dir", filepath.Join(dir, "cache-"+token)}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, st := range []struct {
		token   string
		args    []string
		want    string
		wantErr bool
	}{
		{token: "ann-token", args: []string{"auth", "whoami"}, want: "ann"},
		{token: "ann-token", args: []string{"auth", "can-i", "create", "widgets.example.setpoint.dev"}, want: "yes"},
		{token: "ann-token", args: []string{"auth", "can-i", "create", "widgets.example.setpoint.dev", "-n", "b"}, want: "no", wantErr: true},
		{token: "ann-token", args: []string{"auth", "can-i", "get", "/apis"}, want: "yes"},
		{token: "ann-token", args: []string{"auth", "can-i", "get", "/metrics"}, want: "no", wantErr: true},
		{token: "ann-token", args: []string{"auth", "can-i", "--list", "-n", "b"}, want: "widgets.example.setpoint.dev"},
		{token: "ann-token", args: []string{"get", "widgets", "-n", "b"},
			want: `Error from server (Forbidden): widgets.example.setpoint.dev is forbidden: User "ann" cannot list resource "widgets" in API group "example.setpoint.dev" in the namespace "b"`, wantErr: true},
		{token: "ann-token", args: []string{"get", "widgets"}, want: "No resources found in a namespace"},
		{token: "bob-token", args: []string{"auth", "can-i", "list", "widgets.example.setpoint.dev"}, want: "no", wantErr: true},
		{token: "bob-token", args: []string{"auth", "can-i", "--list"}, want: "selfsubjectaccessreviews.authorization.k8s.io"},
		{token: "admin-token", args: []string{"auth", "can-i", "delete", "widgets.example.setpoint.dev", "-n", "b"}, want: "yes"},
		{token: "admin-token", args: []string{"auth", "can-i", "--list"}, want: "*.*"},
		{token: "admin-token", args: []string{"auth", "whoami"}, want: "system:masters"},
	} {
		out, err := kubectl(st.token, st.args...)
		if (err != nil) != st.wantErr || !strings.Contains(out, st.want) {
			t.Errorf("kubectl %s (%s): err %v, output:\n%s\nwant %q", strings.Join(st.args, " "), st.token, err, out, st.want)
		}
	}
}

// TestAuthorizationPathTricks sends paths that decode to one request and
// route to another (escaped slashes, dot segments, doubled slashes, the
// /watch/ prefix, selectors): none of them lets ann list namespace b, where
// she may only get and patch widgets by name, or delete there.
func TestAuthorizationPathTricks(t *testing.T) {
	s := newAuthzServer(t)
	s.setupWidgets(t)
	s.mustDo(t, "admin-token", http.StatusCreated, request{method: "POST", path: widgetsIn("b"),
		body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"secret"},"spec":{"name":"W","size":"small"}}`})
	for _, tt := range []struct{ method, path string }{
		{"GET", "/apis/example.setpoint.dev/v1/namespaces/b/widgets"},
		{"GET", "/apis/example.setpoint.dev/v1/namespaces/a/../b/widgets"},
		{"GET", "/apis/example.setpoint.dev/v1/namespaces/a%2F..%2Fb/widgets"},
		{"GET", "/apis/example.setpoint.dev/v1/namespaces%2Fb/widgets"},
		{"GET", "/apis/example.setpoint.dev/v1/namespaces/b%2Fwidgets"},
		{"GET", "/apis//example.setpoint.dev/v1/namespaces/b/widgets"},
		{"GET", "//apis/example.setpoint.dev/v1/namespaces/b/widgets"},
		{"GET", "/apis/example.setpoint.dev/v1/namespaces/b/widgets/"},
		{"GET", "/apis/example.setpoint.dev/v1/watch/namespaces/b/widgets"},
		{"GET", "/apis/example.setpoint.dev/v1/namespaces/b/widgets?watch=true"},
		{"GET", "/apis/example.setpoint.dev/v1/widgets"},
		{"GET", "/apis/example.setpoint.dev/v1/widgets?fieldSelector=metadata.namespace%3Db"},
		{"GET", "/apis/example.setpoint.dev/v1/namespaces/a/widgets?fieldSelector=metadata.namespace%3Db"},
		{"DELETE", "/apis/example.setpoint.dev/v1/namespaces/b/widgets/secret"},
		{"DELETE", "/apis/example.setpoint.dev/v1/namespaces/a/../b/widgets/secret"},
	} {
		req, err := http.NewRequest(tt.method, s.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		// Keep the path as written: no cleaning, no re-escaping.
		req.URL.Opaque = tt.path
		req.Header.Set("Authorization", "Bearer ann-token")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := s.Client().Do(req.WithContext(ctx))
		if err != nil {
			cancel()
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		t.Logf("%s %s: %d", tt.method, tt.path, resp.StatusCode)
		buf := make([]byte, 64<<10)
		n, _ := io.ReadAtLeast(resp.Body, buf, 1)
		resp.Body.Close()
		cancel()
		if body := string(buf[:n]); resp.StatusCode < 300 && strings.Contains(body, `"secret"`) || tt.method == "DELETE" && resp.StatusCode < 300 {
			t.Errorf("%s %s as ann: %d %.300s", tt.method, tt.path, resp.StatusCode, body)
		}
	}
	s.mustDo(t, "admin-token", http.StatusOK, request{path: widgetsIn("b") + "/secret"})
}
