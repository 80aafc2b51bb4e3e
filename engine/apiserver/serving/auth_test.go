package serving

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints/request"
)

const testToken = "s3cr3t-token-for-tests"

func wsProtocol(tok string) string {
	return wsTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(tok))
}

func TestAuthenticator(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		header   http.Header
		wantCode int
		wantUser bool
		wantWS   string // Sec-WebSocket-Protocol the handler sees
		wantMsg  string // in the Status of a 403
	}{
		{name: "no token", path: "/api/v1/namespaces", wantCode: 401},
		{name: "wrong token", path: "/api", header: http.Header{"Authorization": {"Bearer nope"}}, wantCode: 401},
		{name: "token prefix only", path: "/api", header: http.Header{"Authorization": {"Bearer " + testToken[:5]}}, wantCode: 401},
		{name: "basic scheme", path: "/api", header: http.Header{"Authorization": {"Basic " + testToken}}, wantCode: 401},
		{name: "empty bearer", path: "/api", header: http.Header{"Authorization": {"Bearer "}}, wantCode: 401},
		{name: "right token", path: "/api", header: http.Header{"Authorization": {"Bearer " + testToken}}, wantCode: 200, wantUser: true},
		{name: "scheme is case-insensitive", path: "/api", header: http.Header{"Authorization": {"bearer " + testToken}}, wantCode: 200, wantUser: true},
		{name: "metrics need a token", path: "/metrics", wantCode: 401},
		{name: "healthz is open", path: "/healthz", wantCode: 200},
		{name: "readyz subpath is open", path: "/readyz/ping", wantCode: 200},
		{name: "livez is open", path: "/livez", wantCode: 200},
		{name: "version is open", path: "/version", wantCode: 200},
		{name: "healthz with a wrong token is open", path: "/healthz", header: http.Header{"Authorization": {"Bearer nope"}}, wantCode: 200},
		{name: "look-alike path is not open", path: "/healthzz", wantCode: 401},
		{name: "public path is open", path: "/ui/index.html", wantCode: 200},
		{name: "public path root is open", path: "/ui", wantCode: 200},
		{name: "public look-alike is not open", path: "/uix", wantCode: 401},
		{name: "websocket subprotocol token", path: "/api/v1/namespaces",
			header:   http.Header{"Sec-Websocket-Protocol": {"v4.channel.k8s.io, " + wsProtocol(testToken)}},
			wantCode: 200, wantUser: true, wantWS: "v4.channel.k8s.io"},
		{name: "websocket subprotocol token alone", path: "/api",
			header:   http.Header{"Sec-Websocket-Protocol": {wsProtocol(testToken)}},
			wantCode: 200, wantUser: true, wantWS: ""},
		{name: "websocket wrong token", path: "/api",
			header: http.Header{"Sec-Websocket-Protocol": {wsProtocol("nope")}}, wantCode: 401},
		{name: "websocket token not base64url", path: "/api",
			header: http.Header{"Sec-Websocket-Protocol": {wsTokenPrefix + "!!!"}}, wantCode: 401},
		{name: "impersonating a user", path: "/api",
			header: http.Header{"Authorization": {"Bearer " + testToken}, "Impersonate-User": {"bob"}}, wantCode: 403,
			wantMsg: `users "bob" is forbidden: User "setpoint-admin" cannot impersonate resource "users" in API group "" at the cluster scope: impersonation is not supported`},
		{name: "impersonating a group", path: "/api",
			header:   http.Header{"Authorization": {"Bearer " + testToken}, "Impersonate-Group": {"devs"}},
			wantCode: 403, wantMsg: `groups "devs" is forbidden`},
		{name: "impersonation extras", path: "/api",
			header:   http.Header{"Authorization": {"Bearer " + testToken}, "Impersonate-Extra-Scopes": {"view"}},
			wantCode: 403, wantMsg: `userextras "view" is forbidden`},
		{name: "impersonation without a token", path: "/api", header: http.Header{"Impersonate-User": {"bob"}}, wantCode: 401},
		{name: "user and groups: the user is named", path: "/api",
			header:   http.Header{"Authorization": {"Bearer " + testToken}, "Impersonate-Group": {"devs"}, "Impersonate-User": {"bob"}, "Impersonate-Extra-Scopes": {"view"}},
			wantCode: 403, wantMsg: `users "bob" is forbidden`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sawUser bool
			var sawWS string
			h := NewAuthenticator(testToken, "/ui").Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u, ok := request.UserFrom(r.Context()); ok {
					sawUser = true
					if u.GetName() != AdminUser.Name || !slices.Contains(u.GetGroups(), "system:masters") {
						t.Errorf("user %v", u)
					}
				}
				if r.Header.Get("Authorization") != "" {
					t.Error("Authorization header passed on")
				}
				sawWS = r.Header.Get("Sec-Websocket-Protocol")
			}))
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			for k, v := range tt.header {
				req.Header[http.CanonicalHeaderKey(k)] = v
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Fatalf("code %d, want %d", rec.Code, tt.wantCode)
			}
			if sawUser != tt.wantUser {
				t.Errorf("user set = %v, want %v", sawUser, tt.wantUser)
			}
			if tt.wantUser && sawWS != tt.wantWS {
				t.Errorf("handler saw Sec-WebSocket-Protocol %q, want %q", sawWS, tt.wantWS)
			}
			if tt.wantCode == 403 {
				var st metav1.Status
				if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
					t.Fatalf("403 body %q: %v", rec.Body, err)
				}
				if st.Reason != metav1.StatusReasonForbidden || !strings.HasPrefix(st.Message, tt.wantMsg) {
					t.Errorf("403 %s: %q, want it to begin %q", st.Reason, st.Message, tt.wantMsg)
				}
			}
			if tt.wantCode == 401 {
				var st metav1.Status
				if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
					t.Fatalf("401 body %q: %v", rec.Body, err)
				}
				if st.Kind != "Status" || st.Code != 401 || st.Reason != metav1.StatusReasonUnauthorized || st.Status != metav1.StatusFailure {
					t.Errorf("401 body %+v", st)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("content type %q", ct)
				}
			}
		})
	}
}

func TestZeroAuthenticatorRejects(t *testing.T) {
	h := (&Authenticator{}).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/api", nil)
	req.Header.Set("Authorization", "Bearer ")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Fatalf("code %d, want 401", rec.Code)
	}
}

// FuzzAuthenticate: whatever the headers hold, only the exact token
// authenticates, and nothing panics.
func FuzzAuthenticate(f *testing.F) {
	f.Add("Bearer "+testToken, "")
	f.Add("bearer  "+testToken+" ", "")
	f.Add("", "v4.channel.k8s.io, "+wsProtocol(testToken))
	f.Add("", wsTokenPrefix+"====")
	f.Add("Basic x", wsProtocol("x")+","+wsProtocol(testToken))
	a := NewAuthenticator(testToken)
	f.Fuzz(func(t *testing.T, authz, protocols string) {
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		if protocols != "" {
			r.Header.Set("Sec-WebSocket-Protocol", protocols)
		}
		_, ok := a.Authenticate(r)
		if !ok {
			return
		}
		// Accepted: the credential presented must be the token itself.
		if authz != "" {
			_, tok, _ := strings.Cut(authz, " ")
			if strings.TrimSpace(tok) != testToken {
				t.Fatalf("accepted Authorization %q", authz)
			}
		} else if !strings.Contains(protocols, wsTokenPrefix) {
			t.Fatalf("accepted protocols %q without a token protocol", protocols)
		}
		if strings.Contains(r.Header.Get("Sec-WebSocket-Protocol"), wsTokenPrefix) {
			t.Fatalf("token protocol left in the header: %q", r.Header.Get("Sec-WebSocket-Protocol"))
		}
	})
}
