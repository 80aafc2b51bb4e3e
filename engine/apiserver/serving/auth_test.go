package serving

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
)

const testToken = "s3cr3t-token-for-tests"

func wsProtocol(tok string) string {
	return wsTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(tok))
}

// wsHeader is a WebSocket upgrade's headers with protocols.
func wsHeader(protocols string) http.Header {
	return http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Protocol": {protocols}}
}

func TestAuthenticator(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		header   http.Header
		wantCode int
		wantUser bool
		wantWS   string // Sec-WebSocket-Protocol the handler sees
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
			header:   wsHeader("v4.channel.k8s.io, " + wsProtocol(testToken)),
			wantCode: 200, wantUser: true, wantWS: "v4.channel.k8s.io"},
		{name: "websocket subprotocol token in its own header", path: "/api/v1/namespaces",
			header:   http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Protocol": {wsProtocol(testToken), "setpoint.watch.v1"}},
			wantCode: 200, wantUser: true, wantWS: "setpoint.watch.v1"},
		{name: "websocket subprotocol token alone", path: "/api",
			header: wsHeader(wsProtocol(testToken)), wantCode: 401},
		{name: "websocket token without an upgrade", path: "/api",
			header: http.Header{"Sec-Websocket-Protocol": {"v4.channel.k8s.io, " + wsProtocol(testToken)}}, wantCode: 401},
		{name: "websocket wrong token", path: "/api",
			header: wsHeader(wsProtocol("nope") + ", v4.channel.k8s.io"), wantCode: 401},
		{name: "websocket two tokens", path: "/api",
			header: wsHeader(wsProtocol(testToken) + ", " + wsProtocol(testToken) + ", v4.channel.k8s.io"), wantCode: 401},
		{name: "websocket token not base64url", path: "/api",
			header: wsHeader(wsTokenPrefix + "!!!, v4.channel.k8s.io"), wantCode: 401},
		{name: "public path drops the token protocol", path: "/ui/index.html",
			header: wsHeader(wsProtocol("nope") + ", v4.channel.k8s.io"), wantCode: 200, wantWS: "v4.channel.k8s.io"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sawUser bool
			var sawWS string
			h := NewAuthenticator(AuthenticatorOptions{Token: testToken, Public: []string{"/ui"}}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u, ok := request.UserFrom(r.Context()); ok {
					sawUser = true
					if u.GetName() != AdminUser.Name || !slices.Contains(u.GetGroups(), "system:masters") || !slices.Contains(u.GetGroups(), "system:authenticated") {
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
			if (tt.wantUser || tt.wantWS != "") && sawWS != tt.wantWS {
				t.Errorf("handler saw Sec-WebSocket-Protocol %q, want %q", sawWS, tt.wantWS)
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
	f.Add("", wsProtocol(testToken))
	f.Add("", wsTokenPrefix+"====")
	f.Add("Basic x", wsProtocol("x")+","+wsProtocol(testToken))
	a := NewAuthenticator(AuthenticatorOptions{Token: testToken})
	f.Fuzz(func(t *testing.T, authz, protocols string) {
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
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
		// Accepted: one of the credentials presented must be the token
		// itself, the bearer token or the one subprotocol token.
		_, tok, _ := strings.Cut(strings.TrimSpace(authz), " ")
		if tok != testToken && strings.Count(protocols, wsTokenPrefix) != 1 {
			t.Fatalf("accepted Authorization %q, protocols %q", authz, protocols)
		}
		if tok != testToken && !strings.Contains(strings.ReplaceAll(protocols, " ", ""), wsProtocol(testToken)) {
			t.Fatalf("accepted protocols %q without the token's", protocols)
		}
	})
}

// TestAuthenticatorTokens: further token authenticators are asked after
// the admin token, their users get system:authenticated, and why a token
// was refused is logged without the token, even when an authenticator's
// error quotes it.
func TestAuthenticatorTokens(t *testing.T) {
	const leaky = "leaky-token-0123456789"
	quoting := authenticator.TokenFunc(func(_ context.Context, tok string) (*authenticator.Response, bool, error) {
		return nil, false, fmt.Errorf("token %q is not known", tok)
	})
	logs := &syncBuffer{}
	a := NewAuthenticator(AuthenticatorOptions{Token: testToken, Tokens: []authenticator.Token{tokenUsers(t), quoting},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	var got user.Info
	h := a.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got, _ = request.UserFrom(r.Context()) }))
	for _, tc := range []struct {
		token, wantUser string
		wantGroups      []string
	}{
		{testToken, "setpoint-admin", []string{"system:masters", "system:authenticated"}},
		{"alice-token", "alice", []string{"dev", "system:authenticated"}},
		{"bob-token", "bob", []string{"system:authenticated"}},
		{leaky, "", nil},
	} {
		got = nil
		code, _ := serve(t, h, http.MethodGet, "/api", tc.token, nil)
		if tc.wantUser == "" {
			if code != 401 || got != nil {
				t.Errorf("%s: %d %v, want 401", tc.token, code, got)
			}
			continue
		}
		if code != 200 || got == nil || got.GetName() != tc.wantUser || !slices.Equal(got.GetGroups(), tc.wantGroups) {
			t.Errorf("%s: %d %v, want %s in %v", tc.token, code, got, tc.wantUser, tc.wantGroups)
		}
	}
	out := logs.String()
	if strings.Contains(out, leaky) || !strings.Contains(out, `token \"[redacted]\" is not known`) {
		t.Errorf("log:\n%s\nwant the refusal with the token redacted", out)
	}
}
