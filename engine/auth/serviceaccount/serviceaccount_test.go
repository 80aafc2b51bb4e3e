package serviceaccount

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
)

// accounts is a fixed set of ServiceAccounts: namespace/name -> UID.
type accounts struct {
	mu sync.Mutex
	m  map[string]string
}

func (a *accounts) UID(_ context.Context, ns, name string) (string, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	uid, ok := a.m[ns+"/"+name]
	return uid, ok, nil
}

func (a *accounts) set(ns, name, uid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if uid == "" {
		delete(a.m, ns+"/"+name)
	} else {
		a.m[ns+"/"+name] = uid
	}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fixture is an issuer and an authenticator sharing keys and a clock.
type fixture struct {
	now      time.Time
	keys     *Keys
	accounts *accounts
	issuer   *Issuer
	auth     *Authenticator
}

func newFixture(t *testing.T, keys *Keys, audiences ...string) *fixture {
	t.Helper()
	f := &fixture{now: time.Now(), keys: keys, accounts: &accounts{m: map[string]string{"team/robot": "uid-1"}}}
	clock := func() time.Time { return f.now }
	var err error
	if f.issuer, err = NewIssuer(IssuerOptions{Keys: keys, Now: clock}); err != nil {
		t.Fatal(err)
	}
	if f.auth, err = NewAuthenticator(AuthenticatorOptions{Keys: keys, Accounts: f.accounts, Audiences: audiences, Now: clock}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) issue(t *testing.T, aud ...string) string {
	t.Helper()
	if len(aud) == 0 {
		aud = []string{DefaultIssuer}
	}
	tok, exp, err := f.issuer.Issue(Request{Namespace: "team", Name: "robot", UID: "uid-1", Audiences: aud, Lifetime: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if want := f.now.Truncate(time.Second).Add(10 * time.Minute); !exp.Equal(want) {
		t.Fatalf("expiry = %v, want %v", exp, want)
	}
	return tok
}

func TestTokenAuthenticates(t *testing.T) {
	f := newFixture(t, NewKeys(mustKey(t)))
	tok := f.issue(t)
	resp, ok, err := f.auth.AuthenticateToken(context.Background(), tok)
	if err != nil || !ok {
		t.Fatalf("AuthenticateToken = %v, %v; want the ServiceAccount", ok, err)
	}
	u := resp.User
	if u.GetName() != "system:serviceaccount:team:robot" || u.GetUID() != "uid-1" {
		t.Errorf("user = %q uid %q", u.GetName(), u.GetUID())
	}
	wantGroups := []string{"system:serviceaccounts", "system:serviceaccounts:team", user.AllAuthenticated}
	if !slices.Equal(u.GetGroups(), wantGroups) {
		t.Errorf("groups = %v, want %v", u.GetGroups(), wantGroups)
	}
	if id := u.GetExtra()[user.CredentialIDKey]; len(id) != 1 || !strings.HasPrefix(id[0], "JTI=") {
		t.Errorf("credential ID = %v, want JTI=...", id)
	}
	if !slices.Equal(resp.Audiences, []string{DefaultIssuer}) {
		t.Errorf("audiences = %v", resp.Audiences)
	}
}

func TestTokenRefused(t *testing.T) {
	other := newFixture(t, NewKeys(mustKey(t)))
	tests := []struct {
		name string
		// prepare returns the token to check, after changing f.
		prepare func(t *testing.T, f *fixture) string
		// wantErr is nil for a token that is not this issuer's (false, no
		// error: the next authenticator judges it).
		wantErr error
	}{
		{"expired", func(t *testing.T, f *fixture) string {
			tok := f.issue(t)
			f.now = f.now.Add(10*time.Minute + time.Second)
			return tok
		}, ErrInvalidToken},
		{"not yet valid", func(t *testing.T, f *fixture) string {
			tok := f.issue(t)
			f.now = f.now.Add(-clockSkew - 2*time.Second)
			return tok
		}, ErrInvalidToken},
		{"another audience", func(t *testing.T, f *fixture) string { return f.issue(t, "https://vault.example") }, ErrAudience},
		{"another key", func(t *testing.T, f *fixture) string { return other.issue(t) }, ErrUnknownKey},
		{"forged signature", func(t *testing.T, f *fixture) string {
			// other's signature under this server's key ID.
			good, forged := strings.Split(f.issue(t), "."), strings.Split(other.issue(t), ".")
			return good[0] + "." + good[1] + "." + forged[2]
		}, ErrInvalidToken},
		{"changed claims", func(t *testing.T, f *fixture) string {
			parts := strings.Split(f.issue(t), ".")
			sub := strings.Split(f.issue(t, "a", DefaultIssuer), ".")
			return parts[0] + "." + sub[1] + "." + parts[2]
		}, ErrInvalidToken},
		{"deleted account", func(t *testing.T, f *fixture) string {
			tok := f.issue(t)
			f.accounts.set("team", "robot", "")
			return tok
		}, ErrAccountGone},
		{"account recreated with a new UID", func(t *testing.T, f *fixture) string {
			tok := f.issue(t)
			f.accounts.set("team", "robot", "uid-2")
			return tok
		}, ErrAccountGone},
		{"another issuer", func(t *testing.T, f *fixture) string {
			iss, err := NewIssuer(IssuerOptions{Keys: f.keys, Issuer: "https://oidc.example"})
			if err != nil {
				t.Fatal(err)
			}
			tok, _, err := iss.Issue(Request{Namespace: "team", Name: "robot", UID: "uid-1", Audiences: []string{DefaultIssuer}, Lifetime: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, nil},
		{"not a JWT", func(*testing.T, *fixture) string { return "an-opaque-static-token" }, nil},
		{"three garbage parts", func(*testing.T, *fixture) string { return "a.b.c" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, NewKeys(mustKey(t)))
			tok := tt.prepare(t, f)
			resp, ok, err := f.auth.AuthenticateToken(context.Background(), tok)
			if ok || resp != nil {
				t.Fatalf("AuthenticateToken = %v, %v; want refused", resp, ok)
			}
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), tok) {
				t.Fatalf("the error quotes the token: %v", err)
			}
		})
	}
}

// An extra audience the server accepts is accepted; the server's own
// remains accepted.
func TestConfiguredAudiences(t *testing.T) {
	f := newFixture(t, NewKeys(mustKey(t)), DefaultIssuer, "https://vault.example")
	for _, aud := range [][]string{{"https://vault.example"}, {DefaultIssuer}, {"x", "https://vault.example"}} {
		resp, ok, err := f.auth.AuthenticateToken(context.Background(), f.issue(t, aud...))
		if !ok || err != nil {
			t.Fatalf("audiences %v: %v, %v", aud, ok, err)
		}
		if len(resp.Audiences) != 1 {
			t.Errorf("audiences %v: response audiences %v", aud, resp.Audiences)
		}
	}
}

// The verifier holds a set of keys: a token signed by any of them verifies,
// whichever signs now.
func TestOlderKeysVerify(t *testing.T) {
	old, cur := mustKey(t), mustKey(t)
	before := newFixture(t, NewKeys(old))
	tok := before.issue(t)
	after := newFixture(t, NewKeys(old, cur))
	if after.keys.CurrentID() != KeyID(&cur.PublicKey) {
		t.Fatal("the last key does not sign")
	}
	if _, ok, err := after.auth.AuthenticateToken(context.Background(), tok); !ok || err != nil {
		t.Fatalf("the older key's token: %v, %v", ok, err)
	}
	if _, ok, err := after.auth.AuthenticateToken(context.Background(), after.issue(t)); !ok || err != nil {
		t.Fatalf("the current key's token: %v, %v", ok, err)
	}
}

// A token remembered as verified is still refused once it expires, its
// ServiceAccount is deleted or re-created with another UID.
func TestVerifiedTokenRechecked(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		change  func(f *fixture)
		wantErr error
	}{
		{"expired", func(f *fixture) { f.now = f.now.Add(10 * time.Minute) }, ErrInvalidToken},
		{"deleted", func(f *fixture) { f.accounts.set("team", "robot", "") }, ErrAccountGone},
		{"re-created", func(f *fixture) { f.accounts.set("team", "robot", "uid-2") }, ErrAccountGone},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, NewKeys(mustKey(t)))
			tok := f.issue(t)
			for range 2 { // the second from the cache
				if _, ok, err := f.auth.AuthenticateToken(ctx, tok); !ok || err != nil {
					t.Fatalf("before the change: %v, %v", ok, err)
				}
			}
			if len(f.auth.verified.Keys()) != 1 {
				t.Fatalf("verified tokens remembered: %d, want 1", len(f.auth.verified.Keys()))
			}
			tt.change(f)
			if _, ok, err := f.auth.AuthenticateToken(ctx, tok); ok || !errors.Is(err, tt.wantErr) {
				t.Fatalf("after the change: %v, %v; want %v", ok, err, tt.wantErr)
			}
		})
	}
}
