package serving

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// fakeAuthorizer allows what its rules name, as "USER VERB GROUP RESOURCE[/SUB] NS"
// for resources (NS "-" at the cluster scope) and "USER VERB PATH" for other
// paths; it records what it was asked.
type fakeAuthorizer struct {
	authorizer.AuthorizerFunc
	allow map[string]bool
	err   error // returned with every decision

	mu    sync.Mutex
	asked []string
}

func newFakeAuthorizer(rules ...string) *fakeAuthorizer {
	f := &fakeAuthorizer{allow: map[string]bool{}}
	for _, r := range rules {
		f.allow[r] = true
	}
	f.AuthorizerFunc = f.authorize
	return f
}

func attrsKey(a authorizer.Attributes) string {
	if !a.IsResourceRequest() {
		return a.GetUser().GetName() + " " + a.GetVerb() + " " + a.GetPath()
	}
	res := a.GetResource()
	if a.GetSubresource() != "" {
		res += "/" + a.GetSubresource()
	}
	ns := a.GetNamespace()
	if ns == "" {
		ns = "-"
	}
	return a.GetUser().GetName() + " " + a.GetVerb() + " " + a.GetAPIGroup() + " " + res + " " + ns
}

func (f *fakeAuthorizer) authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	k := attrsKey(a)
	f.mu.Lock()
	f.asked = append(f.asked, k)
	f.mu.Unlock()
	if f.allow[k] {
		return authorizer.DecisionAllow, "", f.err
	}
	return authorizer.DecisionNoOpinion, "", f.err
}

// testUserHeader names the user a test request is served as.
const testUserHeader = "X-Test-User"

var testUsers = map[string]user.Info{
	"ann":   &user.DefaultInfo{Name: "ann", Groups: []string{user.AllAuthenticated}},
	"admin": AdminUser,
}

// authorizeChain is NewHandler's chain with a user picked by a header in
// place of authentication: Instrument, the user, Authorize, then /metrics,
// the profiles when profiling is on, and api.
func authorizeChain(a authorizer.Authorizer, profiling bool, api http.Handler) http.Handler {
	m := NewMetrics()
	routes := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/metrics":
			m.Handler().ServeHTTP(w, r)
		case profiling && strings.HasPrefix(r.URL.Path, pprofPrefix):
			servePprof(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	authorized := Authorize(routes, a, log, "/ui")
	withUser := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, ok := testUsers[r.Header.Get(testUserHeader)]; ok {
			r = r.WithContext(request.WithUser(r.Context(), u))
		}
		authorized.ServeHTTP(w, r)
	})
	return Instrument(withUser, InstrumentOptions{Logger: log, Metrics: m})
}

// apiEcho answers 200 with the verb and resource the request resolved to.
var apiEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	info, _ := request.RequestInfoFrom(r.Context())
	_, _ = io.WriteString(w, "api "+info.Verb+" "+info.Resource)
})

type authzCase struct {
	name    string
	user    string
	method  string
	path    string
	header  map[string]string
	want    int
	wantMsg string // the 403 Status's message, or a part of a 200 body
}

func runAuthzCases(t *testing.T, h http.Handler, cases []authzCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.user != "" {
				req.Header.Set(testUserHeader, tt.user)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body := rec.Body.String()
			if rec.Code != tt.want {
				t.Fatalf("%s %s as %q: %d %.300s; want %d", tt.method, tt.path, tt.user, rec.Code, body, tt.want)
			}
			if rec.Code == http.StatusForbidden || rec.Code == http.StatusInternalServerError {
				var st metav1.Status
				if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
					t.Fatalf("%d body is not a Status: %v: %s", rec.Code, err, body)
				}
				if st.Kind != "Status" || st.APIVersion != "v1" || st.Code != int32(tt.want) || rec.Header().Get("Content-Type") != "application/json" {
					t.Errorf("Status: %+v (Content-Type %q)", st, rec.Header().Get("Content-Type"))
				}
				if rec.Code == http.StatusForbidden && st.Reason != metav1.StatusReasonForbidden {
					t.Errorf("reason %q, want Forbidden", st.Reason)
				}
				body = st.Message
			}
			if tt.wantMsg != "" && !strings.Contains(body, tt.wantMsg) {
				t.Errorf("got %q, want it to hold %q", body, tt.wantMsg)
			}
		})
	}
}

func TestAuthorizeEveryPath(t *testing.T) {
	const (
		widgets = "/apis/example.dev/v1/namespaces/ns/widgets"
		modules = "/apis/setpoint.dev/v1alpha1/modules"
	)
	fake := newFakeAuthorizer(
		"ann list example.dev widgets ns",
		"ann get example.dev widgets ns",
		"ann create example.dev widgets ns",
		"ann get setpoint.dev plugins/log -",
		"ann create setpoint.dev modules -",
		"ann get /metrics",
		"ann get /debug/pprof/heap",
		"ann get /apis",
		"ann get /openapi/v3",
	)
	h := authorizeChain(fake, true, apiEcho)
	wsHeaders := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	runAuthzCases(t, h, []authzCase{
		{name: "list allowed", user: "ann", method: "GET", path: widgets, want: 200, wantMsg: "api list widgets"},
		{name: "get allowed", user: "ann", method: "GET", path: widgets + "/w1", want: 200, wantMsg: "api get widgets"},
		{name: "list in another namespace", user: "ann", method: "GET", path: "/apis/example.dev/v1/namespaces/other/widgets", want: 403,
			wantMsg: `widgets.example.dev is forbidden: User "ann" cannot list resource "widgets" in API group "example.dev" in the namespace "other"`},
		{name: "list at the cluster scope", user: "ann", method: "GET", path: "/apis/example.dev/v1/widgets", want: 403,
			wantMsg: `User "ann" cannot list resource "widgets" in API group "example.dev" at the cluster scope`},
		{name: "watch is not list", user: "ann", method: "GET", path: widgets + "?watch=true", want: 403,
			wantMsg: `User "ann" cannot watch resource "widgets" in API group "example.dev" in the namespace "ns"`},
		{name: "watch of one object", user: "ann", method: "GET", path: widgets + "?watch=1&fieldSelector=metadata.name%3Dw1", want: 403, wantMsg: `cannot watch resource "widgets"`},
		{name: "watch over WebSocket is checked at the upgrade", user: "ann", method: "GET", path: widgets + "?watch=true", header: wsHeaders, want: 403,
			wantMsg: `User "ann" cannot watch resource "widgets"`},
		{name: "create allowed", user: "ann", method: "POST", path: widgets, want: 200, wantMsg: "api create widgets"},
		{name: "dry-run create is create", user: "ann", method: "POST", path: widgets + "?dryRun=All", want: 200, wantMsg: "api create widgets"},
		{name: "update", user: "ann", method: "PUT", path: widgets + "/w1", want: 403, wantMsg: `widgets.example.dev "w1" is forbidden: User "ann" cannot update resource "widgets"`},
		{name: "server-side apply is patch", user: "ann", method: "PATCH", path: widgets + "/w1?fieldManager=x", header: map[string]string{"Content-Type": "application/apply-patch+yaml"}, want: 403,
			wantMsg: `User "ann" cannot patch resource "widgets" in API group "example.dev" in the namespace "ns"`},
		{name: "status subresource", user: "ann", method: "PUT", path: widgets + "/w1/status", want: 403, wantMsg: `cannot update resource "widgets/status"`},
		{name: "delete", user: "ann", method: "DELETE", path: widgets + "/w1", want: 403, wantMsg: `cannot delete resource "widgets"`},
		{name: "deletecollection", user: "ann", method: "DELETE", path: widgets, want: 403, wantMsg: `cannot deletecollection resource "widgets"`},
		{name: "module upload allowed", user: "ann", method: "POST", path: modules, want: 200, wantMsg: "api create modules"},
		{name: "module delete", user: "ann", method: "DELETE", path: modules + "/sha256:abc", want: 403,
			wantMsg: `modules.setpoint.dev "sha256:abc" is forbidden: User "ann" cannot delete resource "modules" in API group "setpoint.dev" at the cluster scope`},
		{name: "Plugin create", user: "ann", method: "POST", path: "/apis/setpoint.dev/v1alpha1/plugins", want: 403, wantMsg: `cannot create resource "plugins" in API group "setpoint.dev"`},
		{name: "Plugin log allowed", user: "ann", method: "GET", path: "/apis/setpoint.dev/v1alpha1/plugins/p/log", want: 200, wantMsg: "api get plugins"},
		{name: "snapshot", user: "ann", method: "GET", path: "/apis/setpoint.dev/v1alpha1/snapshot", want: 403, wantMsg: `cannot list resource "snapshot" in API group "setpoint.dev"`},
		{name: "metrics allowed", user: "ann", method: "GET", path: "/metrics", want: 200, wantMsg: "setpoint_apiserver_requests_total"},
		{name: "pprof allowed", user: "ann", method: "GET", path: "/debug/pprof/heap?debug=1", want: 200, wantMsg: "heap profile"},
		{name: "pprof denied", user: "ann", method: "GET", path: "/debug/pprof/goroutine?debug=1", want: 403, wantMsg: `User "ann" cannot get path "/debug/pprof/goroutine"`},
		{name: "discovery allowed", user: "ann", method: "GET", path: "/apis", want: 200},
		{name: "group discovery is a path", user: "ann", method: "GET", path: "/apis/example.dev/v1", want: 403, wantMsg: `User "ann" cannot get path "/apis/example.dev/v1"`},
		{name: "openapi allowed", user: "ann", method: "GET", path: "/openapi/v3", want: 200},
		{name: "SubjectAccessReview", user: "ann", method: "POST", path: "/apis/authorization.k8s.io/v1/subjectaccessreviews", want: 403,
			wantMsg: `cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`},
		{name: "the admin is in system:masters", user: "admin", method: "DELETE", path: widgets, want: 200, wantMsg: "api deletecollection widgets"},
		{name: "no user: the authentication layer let it through", method: "GET", path: "/healthz", want: 200},
	})
	// The admin's requests never reach the configured authorizer, and
	// requests without a user are not authorized at all.
	for _, k := range fake.asked {
		if strings.HasPrefix(k, "setpoint-admin ") || strings.HasPrefix(k, " ") {
			t.Errorf("the authorizer was asked %q", k)
		}
	}
}

func TestAuthorizeAnnotatesTheAuditEvent(t *testing.T) {
	var got []map[string]string
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := authorizeChain(newFakeAuthorizer("ann list example.dev widgets ns"), false, api)
	for _, path := range []string{"/apis/example.dev/v1/namespaces/ns/widgets", "/apis/example.dev/v1/namespaces/other/widgets"} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set(testUserHeader, "ann")
		ctx := audit.WithAuditContext(req.Context())
		h.ServeHTTP(httptest.NewRecorder(), req.WithContext(ctx))
		got = append(got, audit.AuditContextFrom(ctx).GetEventAnnotations())
	}
	if got[0]["authorization.k8s.io/decision"] != "allow" || got[1]["authorization.k8s.io/decision"] != "forbid" {
		t.Errorf("audit annotations: %v", got)
	}
	if _, ok := got[0]["authorization.k8s.io/reason"]; !ok {
		t.Errorf("no reason annotation: %v", got[0])
	}
}

func TestAuthorizeProfilingOffServesNoProfiles(t *testing.T) {
	h := authorizeChain(newFakeAuthorizer("ann get /debug/pprof/heap"), false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteStatus(w, http.StatusNotFound, "NotFound", "the API has no "+r.URL.Path)
	}))
	runAuthzCases(t, h, []authzCase{
		{name: "allowed but off", user: "ann", method: "GET", path: "/debug/pprof/heap", want: 404, wantMsg: "the API has no"},
		{name: "denied", user: "ann", method: "GET", path: "/debug/pprof/goroutine", want: 403},
	})
}

// With no authorizer, only system:masters may do anything; others may only
// ask who they are and what they may do.
func TestAuthorizeNilLetsOnlyMasters(t *testing.T) {
	h := authorizeChain(nil, true, apiEcho)
	runAuthzCases(t, h, []authzCase{
		{name: "admin writes", user: "admin", method: "POST", path: "/apis/example.dev/v1/namespaces/ns/widgets", want: 200},
		{name: "admin reads metrics", user: "admin", method: "GET", path: "/metrics", want: 200},
		{name: "admin profiles", user: "admin", method: "GET", path: "/debug/pprof/heap?debug=1", want: 200, wantMsg: "heap profile"},
		{name: "another user may not list", user: "ann", method: "GET", path: "/apis/example.dev/v1/namespaces/ns/widgets", want: 403,
			wantMsg: `User "ann" cannot list resource "widgets" in API group "example.dev" in the namespace "ns"`},
		{name: "nor read discovery", user: "ann", method: "GET", path: "/api", want: 403, wantMsg: `User "ann" cannot get path "/api"`},
		{name: "nor metrics", user: "ann", method: "GET", path: "/metrics", want: 403},
		{name: "public files need no decision", user: "ann", method: "GET", path: "/ui/app.js", want: 200},
		{name: "nor the probes", user: "ann", method: "GET", path: "/readyz", want: 200},
		{name: "nor the version", user: "ann", method: "GET", path: "/version", want: 200},
		{name: "a path that only begins like one does", user: "ann", method: "GET", path: "/uix", want: 403},
		{name: "but whoami", user: "ann", method: "POST", path: "/apis/authentication.k8s.io/v1/selfsubjectreviews", want: 200},
		{name: "and can-i", user: "ann", method: "POST", path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", want: 200},
		{name: "and can-i --list", user: "ann", method: "POST", path: "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", want: 200},
		{name: "not a review of others", user: "ann", method: "POST", path: "/apis/authorization.k8s.io/v1/subjectaccessreviews", want: 403},
		{name: "nor a local one", user: "ann", method: "POST", path: "/apis/authorization.k8s.io/v1/namespaces/ns/localsubjectaccessreviews", want: 403},
	})
}

func TestAuthorizeErrors(t *testing.T) {
	failing := newFakeAuthorizer("ann list example.dev widgets ns")
	failing.err = errors.New("rbac: secret internal detail")
	h := authorizeChain(failing, false, apiEcho)
	runAuthzCases(t, h, []authzCase{
		// An allow stands despite an error, as in kube-apiserver (RBAC
		// reports rules it could not read while another rule allows).
		{name: "allowed with an error", user: "ann", method: "GET", path: "/apis/example.dev/v1/namespaces/ns/widgets", want: 200},
		{name: "error without an allow", user: "ann", method: "GET", path: "/apis/example.dev/v1/namespaces/ns/widgets/w", want: 500, wantMsg: "could not be authorized"},
	})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/apis/example.dev/v1/namespaces/ns/widgets/w", nil)
	req.Header.Set(testUserHeader, "ann")
	h.ServeHTTP(rec, req)
	if strings.Contains(rec.Body.String(), "secret internal detail") {
		t.Errorf("the 500 shows the authorizer's error: %s", rec.Body.String())
	}
}

func TestNewHandlerAuthorizes(t *testing.T) {
	// Through NewHandler the admin token authenticates the admin, in
	// system:masters: allowed whatever the configured authorizer says,
	// which is never asked; without a token, 401 before authorization.
	fake := newFakeAuthorizer()
	h := NewHandler(HandlerOptions{API: apiEcho, Token: "secret", Authorizer: fake, Profiling: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, tt := range []struct {
		path, token string
		want        int
	}{
		{"/apis/example.dev/v1/namespaces/ns/widgets", "secret", 200},
		{"/metrics", "secret", 200},
		{"/debug/pprof/heap?debug=1", "secret", 200},
		{"/metrics", "", 401},
		{"/healthz", "", 200},
	} {
		req := httptest.NewRequest("GET", tt.path, nil)
		if tt.token != "" {
			req.Header.Set("Authorization", "Bearer "+tt.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("GET %s: %d, want %d", tt.path, rec.Code, tt.want)
		}
	}
	if len(fake.asked) != 0 {
		t.Errorf("the authorizer was asked %q", fake.asked)
	}
}

// TestRequestAttributesMatchKubernetes checks the layer's attributes
// against kube-apiserver's filters.GetAuthorizerAttributes, selectors
// included (parsed when asked for).
func TestRequestAttributesMatchKubernetes(t *testing.T) {
	for _, target := range []string{
		"/apis/example.dev/v1/namespaces/ns/widgets?labelSelector=app%3Dweb,tier+in+(a,b)&fieldSelector=metadata.name%3Dx",
		"/apis/example.dev/v1/namespaces/ns/widgets?labelSelector=%3D%3D%3D&fieldSelector=%3D%3D",
		"/apis/example.dev/v1/namespaces/ns/widgets?watch=1&fieldSelector=metadata.name%3Dw1",
		"/apis/example.dev/v1/namespaces/ns/widgets/w1/status",
		"/api/v1/namespaces/ns",
		"/metrics",
		"/debug/pprof/heap",
	} {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		info, err := requestInfoFactory.NewRequestInfo(req)
		if err != nil {
			t.Fatal(err)
		}
		ctx := request.WithUser(request.WithRequestInfo(req.Context(), info), testUsers["ann"])
		want, err := filters.GetAuthorizerAttributes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := requestAttributes(ctx)
		if !ok {
			t.Fatal("no attributes")
		}
		if attrsKey(got) != attrsKey(want) || got.GetVerb() != want.GetVerb() || got.GetName() != want.GetName() ||
			got.GetAPIVersion() != want.GetAPIVersion() || got.GetPath() != want.GetPath() || got.IsReadOnly() != want.IsReadOnly() {
			t.Errorf("%s: attributes %+v, want %+v", target, got.AttributesRecord, want)
		}
		gf, gerr := got.GetFieldSelector()
		wf, werr := want.GetFieldSelector()
		if fmt.Sprint(gf) != fmt.Sprint(wf) || (gerr == nil) != (werr == nil) {
			t.Errorf("%s: field selector %v %v, want %v %v", target, gf, gerr, wf, werr)
		}
		gl, gerr := got.GetLabelSelector()
		wl, werr := want.GetLabelSelector()
		if fmt.Sprint(gl) != fmt.Sprint(wl) || (gerr == nil) != (werr == nil) {
			t.Errorf("%s: label selector %v %v, want %v %v", target, gl, gerr, wl, werr)
		}
	}
}
