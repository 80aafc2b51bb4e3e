package serving

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving/oidctest"
)

// waitOIDC waits until a (which fetches the issuer's discovery document in
// the background) authenticates tok.
func waitOIDC(t *testing.T, a authenticator.Token, tok string) *authenticator.Response {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, ok, err := a.AuthenticateToken(context.Background(), tok)
		if ok {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("the OIDC token was not accepted within 20s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOIDC: ID tokens of a real issuer on loopback authenticate, with the
// username and groups claims and prefixes applied; expired tokens, tokens
// for another audience, from another issuer or signed with a key not in the
// JWKS are refused.
func TestOIDC(t *testing.T) {
	iss := oidctest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := NewOIDC(ctx, OIDCOptions{
		IssuerURL: iss.URL, ClientID: "setpoint", UsernameClaim: "email",
		GroupsClaim: "groups", GroupsPrefix: "oidc:", CAFile: iss.CAFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	good := oidctest.Claims{"sub": "1234", "aud": "setpoint", "email": "ann@example.com", "email_verified": true, "groups": []string{"dev", "ops"}}
	resp := waitOIDC(t, a, iss.Token(t, good))
	if u := resp.User; u.GetName() != "ann@example.com" || !slices.Equal(u.GetGroups(), []string{"oidc:dev", "oidc:ops"}) {
		t.Errorf("user %q in %q, want ann@example.com in oidc:dev, oidc:ops", u.GetName(), u.GetGroups())
	}
	with := func(k string, v any) oidctest.Claims {
		c := oidctest.Claims{}
		for k, v := range good {
			c[k] = v
		}
		c[k] = v
		return c
	}
	for _, tc := range []struct {
		name, token string
	}{
		{"expired", iss.Token(t, with("exp", time.Now().Add(-time.Minute).Unix()))},
		{"wrong audience", iss.Token(t, with("aud", "someone-else"))},
		{"wrong issuer", iss.Token(t, with("iss", "https://evil.example.com"))},
		{"unverified email", iss.Token(t, with("email_verified", false))},
		{"key not in the JWKS", iss.ForgedToken(t, good)},
		{"not a JWT", "not-a-jwt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, ok, err := a.AuthenticateToken(context.Background(), tc.token)
			if ok || resp != nil {
				t.Fatalf("accepted: %+v", resp)
			}
			if err != nil && strings.Contains(err.Error(), tc.token) {
				t.Errorf("the error quotes the token: %v", err)
			}
		})
	}
}

// TestOIDCUsernamePrefix: a username claim other than email gets the
// issuer URL and # by default, as in kube-apiserver; "-" means none.
func TestOIDCUsernamePrefix(t *testing.T) {
	iss := oidctest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	claims := oidctest.Claims{"sub": "1234", "aud": "setpoint"}
	for _, tc := range []struct{ prefix, want string }{
		{"", iss.URL + "#1234"},
		{"-", "1234"},
		{"corp:", "corp:1234"},
	} {
		a, err := NewOIDC(ctx, OIDCOptions{IssuerURL: iss.URL, ClientID: "setpoint", UsernamePrefix: tc.prefix, CAFile: iss.CAFile})
		if err != nil {
			t.Fatal(err)
		}
		if got := waitOIDC(t, a, iss.Token(t, claims)).User.GetName(); got != tc.want {
			t.Errorf("prefix %q: user %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

func TestOIDCOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    OIDCOptions
		want string
	}{
		{"no client id", OIDCOptions{IssuerURL: "https://a.example.com"}, "go together"},
		{"no issuer", OIDCOptions{ClientID: "x"}, "go together"},
		{"http issuer", OIDCOptions{IssuerURL: "http://a.example.com", ClientID: "x"}, "want an https URL"},
		{"missing CA file", OIDCOptions{IssuerURL: "https://a.example.com", ClientID: "x", CAFile: "/nonexistent/ca.crt"}, "--oidc-ca-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
