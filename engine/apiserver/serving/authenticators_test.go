package serving

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Tokens that are not the admin's go to the authenticators, in order; the
// first that accepts one names the user, and one that fails with an error
// accepts nothing.
func TestAuthenticators(t *testing.T) {
	var calls []string
	robot := &user.DefaultInfo{Name: "system:serviceaccount:team:robot"}
	first := authenticator.TokenFunc(func(_ context.Context, tok string) (*authenticator.Response, bool, error) {
		calls = append(calls, "first")
		switch tok {
		case "robot":
			return &authenticator.Response{User: robot}, true, nil
		case "broken":
			return &authenticator.Response{User: robot}, true, errors.New("refused")
		}
		return nil, false, nil
	})
	second := authenticator.TokenFunc(func(_ context.Context, tok string) (*authenticator.Response, bool, error) {
		calls = append(calls, "second")
		if tok == "other" {
			return &authenticator.Response{User: &user.DefaultInfo{Name: "other"}}, true, nil
		}
		return nil, false, errors.New("not mine")
	})
	var got string
	h := NewHandler(HandlerOptions{
		Token: testToken, Authenticators: []authenticator.Token{first, second},
		Authorizer: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionAllow, "", nil
		}),
		API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, _ := request.UserFrom(r.Context())
			got = u.GetName()
		}),
	})
	for _, tt := range []struct {
		token, wantUser string
		wantCode        int
		wantCalls       int
	}{
		{testToken, AdminUser.Name, 200, 0},
		{"robot", robot.Name, 200, 1},
		{"other", "other", 200, 2},
		{"broken", "", 401, 2},
		{"nobody", "", 401, 2},
	} {
		calls, got = nil, ""
		req := httptest.NewRequest(http.MethodGet, "/api", nil)
		req.Header.Set("Authorization", "Bearer "+tt.token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.wantCode || got != tt.wantUser || len(calls) != tt.wantCalls {
			t.Errorf("token %q: %d as %q after %v; want %d as %q after %d calls", tt.token, rec.Code, got, calls, tt.wantCode, tt.wantUser, tt.wantCalls)
		}
	}
}
