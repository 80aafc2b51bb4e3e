package serving

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// impersonators is a fake authorizer: the users it names may impersonate
// the resources listed for them; everyone may do anything else.
type impersonators map[string][]string

func (f impersonators) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetVerb() != "impersonate" || slices.Contains(f[a.GetUser().GetName()], a.GetResource()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (f impersonators) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(f.Authorize(ctx, a))
}

func (impersonators) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// echoUser answers with the user the request runs as.
var echoUser = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	u, ok := request.UserFrom(r.Context())
	if !ok {
		_, _ = w.Write([]byte("anonymous"))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"name": u.GetName(), "groups": u.GetGroups(), "uid": u.GetUID()})
})

// tokenUsers is a token file: alice, bob.
func tokenUsers(t *testing.T) *TokenFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte("alice-token,alice,1,dev\nbob-token,bob,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := NewTokenFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tf
}

type userEcho struct {
	Name   string   `json:"name"`
	Groups []string `json:"groups"`
	UID    string   `json:"uid"`
}

// serve sends a GET to h and returns the code and body.
func serve(t *testing.T, h http.Handler, method, path, token string, header http.Header) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestImpersonation: with no authorizer only system:masters impersonates;
// with one, its impersonate decisions rule, per resource, and the
// impersonated user gets system:authenticated (ServiceAccounts their
// groups).
func TestImpersonation(t *testing.T) {
	tokens := tokenUsers(t)
	tests := []struct {
		name     string
		authz    authorizer.Authorizer
		token    string
		header   http.Header
		wantCode int
		want     userEcho
		wantMsg  string
	}{
		{name: "no impersonation", token: testToken, wantCode: 200,
			want: userEcho{Name: "setpoint-admin", Groups: []string{"system:masters", "system:authenticated"}}},
		{name: "admin as a user", token: testToken, header: http.Header{"Impersonate-User": {"dave"}}, wantCode: 200,
			want: userEcho{Name: "dave", Groups: []string{"system:authenticated"}}},
		{name: "admin as a user in groups with a uid", token: testToken,
			header:   http.Header{"Impersonate-User": {"dave"}, "Impersonate-Group": {"qa", "dev"}, "Impersonate-Uid": {"u-7"}},
			wantCode: 200, want: userEcho{Name: "dave", Groups: []string{"qa", "dev", "system:authenticated"}, UID: "u-7"}},
		{name: "admin as a ServiceAccount", token: testToken, header: http.Header{"Impersonate-User": {"system:serviceaccount:ns1:builder"}}, wantCode: 200,
			want: userEcho{Name: "system:serviceaccount:ns1:builder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated"}}},
		{name: "token file user may not", token: "alice-token", header: http.Header{"Impersonate-User": {"setpoint-admin"}}, wantCode: 403,
			wantMsg: `users "setpoint-admin" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{name: "a group without a user is refused", token: testToken, header: http.Header{"Impersonate-Group": {"qa"}}, wantCode: 400},
		{name: "authorizer allows users", authz: impersonators{"alice": {"users"}}, token: "alice-token",
			header: http.Header{"Impersonate-User": {"carol"}}, wantCode: 200, want: userEcho{Name: "carol", Groups: []string{"system:authenticated"}}},
		{name: "authorizer allows users, not groups", authz: impersonators{"alice": {"users"}}, token: "alice-token",
			header: http.Header{"Impersonate-User": {"carol"}, "Impersonate-Group": {"system:masters"}}, wantCode: 403,
			wantMsg: `groups "system:masters" is forbidden: User "alice" cannot impersonate resource "groups"`},
		{name: "system:masters may whatever the authorizer says", authz: impersonators{"alice": {"users"}}, token: testToken,
			header: http.Header{"Impersonate-User": {"carol"}}, wantCode: 200, want: userEcho{Name: "carol", Groups: []string{"system:authenticated"}}},
		{name: "authorizer does not know bob", authz: impersonators{"alice": {"users"}}, token: "bob-token",
			header: http.Header{"Impersonate-User": {"carol"}}, wantCode: 403, wantMsg: `users "carol" is forbidden: User "bob" cannot impersonate resource "users"`},
		{name: "authorizer allows uids", authz: impersonators{"bob": {"users", "uids"}}, token: "bob-token",
			header: http.Header{"Impersonate-User": {"carol"}, "Impersonate-Uid": {"c-1"}}, wantCode: 200,
			want: userEcho{Name: "carol", Groups: []string{"system:authenticated"}, UID: "c-1"}},
		{name: "anonymous public path drops the headers", header: http.Header{"Impersonate-User": {"dave"}}, wantCode: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(HandlerOptions{API: echoUser, Token: testToken, Authenticators: []authenticator.Token{tokens}, Authorizer: tt.authz,
				Logger: slog.New(slog.DiscardHandler), PublicPaths: []string{"/ui"}})
			// Whom the request runs as may ask who they are.
			method, path := http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews"
			if tt.token == "" {
				method, path = http.MethodGet, "/ui"
			}
			code, body := serve(t, h, method, path, tt.token, tt.header)
			if code != tt.wantCode {
				t.Fatalf("code %d, want %d: %s", code, tt.wantCode, body)
			}
			switch {
			case code == 200 && tt.token == "":
				if body != "anonymous" {
					t.Errorf("body %q", body)
				}
			case code == 200:
				var got userEcho
				if err := json.Unmarshal([]byte(body), &got); err != nil {
					t.Fatal(err)
				}
				if got.Name != tt.want.Name || !slices.Equal(got.Groups, tt.want.Groups) || got.UID != tt.want.UID {
					t.Errorf("user %+v, want %+v", got, tt.want)
				}
			case code == 403:
				var st metav1.Status
				if err := json.Unmarshal([]byte(body), &st); err != nil {
					t.Fatal(err)
				}
				if st.Reason != metav1.StatusReasonForbidden || !strings.HasPrefix(st.Message, tt.wantMsg) {
					t.Errorf("403 %s %q, want one beginning %q", st.Reason, st.Message, tt.wantMsg)
				}
			}
		})
	}
}

// TestTokenUsersWithoutAuthorizer: without an authorizer, users other than
// the admin authenticate but reach only the self-reviews and the paths
// served without credentials; the admin reaches everything.
func TestTokenUsersWithoutAuthorizer(t *testing.T) {
	h := NewHandler(HandlerOptions{API: echoUser, Token: testToken, Authenticators: []authenticator.Token{tokenUsers(t)}, Logger: slog.New(slog.DiscardHandler)})
	tests := []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/api/v1/namespaces", testToken, 200},
		{"GET", "/api/v1/namespaces", "alice-token", 403},
		{"POST", "/api/v1/namespaces", "alice-token", 403},
		{"GET", "/metrics", "alice-token", 403},
		{"GET", "/debug/pprof/", "alice-token", 403},
		{"GET", "/apis/example.setpoint.dev/v1/namespaces/a/widgets/w", "alice-token", 403},
		{"POST", "/apis/setpoint.dev/v1/clientcertificates", "alice-token", 403},
		{"POST", "/apis/setpoint.dev/v1/clientcertificates", testToken, 200},
		{"POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "alice-token", 200},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "alice-token", 200},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", "bob-token", 200},
		{"GET", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "alice-token", 403},
		{"GET", "/api", "alice-token", 403},
		{"GET", "/api", testToken, 200},
		{"GET", "/version", "alice-token", 200},
		{"GET", "/healthz", "", 200},
		{"GET", "/api", "", 401},
	}
	for _, tt := range tests {
		code, body := serve(t, h, tt.method, tt.path, tt.token, nil)
		if code != tt.want {
			t.Errorf("%s %s with %q: %d, want %d: %s", tt.method, tt.path, tt.token, code, tt.want, body)
		}
	}
}
