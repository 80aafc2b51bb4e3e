package serviceaccount

import (
	"context"
	"testing"
	"time"
)

// BenchmarkAuthenticateToken is the cost a ServiceAccount token adds to a
// request: "first" its first request (parse, ES256 verification, claims),
// "again" every later one (the verified token remembered, the
// ServiceAccount looked up).
func BenchmarkAuthenticateToken(b *testing.B) {
	key, err := GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	f := &fixture{keys: NewKeys(key), accounts: &accounts{m: map[string]string{"team/robot": "uid-1"}}}
	f.issuer, _ = NewIssuer(IssuerOptions{Keys: f.keys})
	f.auth, _ = NewAuthenticator(AuthenticatorOptions{Keys: f.keys, Accounts: f.accounts})
	tok, _, err := f.issuer.Issue(Request{Namespace: "team", Name: "robot", UID: "uid-1", Audiences: []string{DefaultIssuer}, Lifetime: MinExpiration})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v, err := f.auth.verify(ctx, tok, time.Now()); v == nil || err != nil {
				b.Fatal(v, err)
			}
		}
	})
	b.Run("again", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, err := f.auth.AuthenticateToken(ctx, tok); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}
