package serviceaccount

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	apiserverserviceaccount "k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
)

// clockSkew is how far ahead of this server's clock a token's iat and nbf
// may be: the replica that issued it may run a little ahead. A token's
// expiry gets no such allowance.
const clockSkew = time.Minute

// Accounts tells the UID of a ServiceAccount that exists (and is not being
// deleted); Cache implements it.
type Accounts interface {
	// UID returns the account's UID, or false when there is none. It may
	// wait, within ctx, for the accounts to be loaded, and fails with
	// ErrNotSynced when they are not.
	UID(ctx context.Context, namespace, name string) (string, bool, error)
}

// Authenticator verifies ServiceAccount tokens; it is an
// authenticator.Token. A token of another issuer, or no JWT at all, is not
// its to judge: it answers false with no error, so that the next
// authenticator may take it. A token of its issuer that does not verify
// answers false with the reason.
type Authenticator struct {
	keys      *Keys
	issuer    string
	audiences []string
	accounts  Accounts
	now       func() time.Time
}

var _ authenticator.Token = (*Authenticator)(nil)

// AuthenticatorOptions configures NewAuthenticator.
type AuthenticatorOptions struct {
	// Keys verify the tokens; required.
	Keys *Keys
	// Accounts tells which ServiceAccounts exist; required.
	Accounts Accounts
	// Issuer is the iss a token must carry; DefaultIssuer when empty.
	Issuer string
	// Audiences are those the server accepts: a token must name one of
	// them. [Issuer] when empty, as kube-apiserver's --api-audiences
	// defaults to its --service-account-issuer.
	Audiences []string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// NewAuthenticator returns an Authenticator.
func NewAuthenticator(opts AuthenticatorOptions) (*Authenticator, error) {
	if opts.Keys == nil || opts.Accounts == nil {
		return nil, fmt.Errorf("serviceaccount: NewAuthenticator needs Keys and Accounts")
	}
	if opts.Issuer == "" {
		opts.Issuer = DefaultIssuer
	}
	if len(opts.Audiences) == 0 {
		opts.Audiences = []string{opts.Issuer}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Authenticator{keys: opts.Keys, issuer: opts.Issuer, audiences: slices.Clone(opts.Audiences), accounts: opts.Accounts, now: opts.Now}, nil
}

// Audiences returns the audiences the server accepts, the default of a
// TokenRequest that names none.
func (a *Authenticator) Audiences() []string { return slices.Clone(a.audiences) }

// AuthenticateToken verifies raw and returns the ServiceAccount's user:
// system:serviceaccount:NS:NAME in system:serviceaccounts,
// system:serviceaccounts:NS and system:authenticated, with the token's ID
// as its credential ID.
func (a *Authenticator) AuthenticateToken(ctx context.Context, raw string) (*authenticator.Response, bool, error) {
	if strings.Count(raw, ".") != 2 {
		return nil, false, nil
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, false, nil
	}
	var unverified jwt.Claims
	if tok.UnsafeClaimsWithoutVerification(&unverified) != nil || unverified.Issuer != a.issuer {
		return nil, false, nil
	}
	if len(tok.Headers) != 1 {
		return nil, false, fmt.Errorf("%w: want one signature", ErrInvalidToken)
	}
	pub, ok := a.keys.verifying(ctx, tok.Headers[0].KeyID)
	if !ok {
		return nil, false, ErrUnknownKey
	}
	var c claims
	if err := tok.Claims(pub, &c); err != nil {
		return nil, false, fmt.Errorf("%w: the signature does not verify", ErrInvalidToken)
	}
	now := a.now()
	if err := c.Claims.ValidateWithLeeway(jwt.Expected{Issuer: a.issuer, Time: now}, clockSkew); err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if c.Expiry == nil || !now.Before(c.Expiry.Time()) {
		return nil, false, fmt.Errorf("%w: %w", ErrInvalidToken, jwt.ErrExpired)
	}
	var auds []string
	for _, aud := range c.Audience {
		if slices.Contains(a.audiences, aud) && !slices.Contains(auds, aud) {
			auds = append(auds, aud)
		}
	}
	if len(auds) == 0 {
		return nil, false, ErrAudience
	}
	k := c.Kubernetes
	ns, name, uid := k.Namespace, k.ServiceAccount.Name, k.ServiceAccount.UID
	if ns == "" || name == "" || uid == "" || c.Subject != apiserverserviceaccount.MakeUsername(ns, name) {
		return nil, false, fmt.Errorf("%w: the claims name no ServiceAccount", ErrInvalidToken)
	}
	have, ok, err := a.accounts.UID(ctx, ns, name)
	if err != nil {
		return nil, false, err
	}
	if !ok || have != uid {
		return nil, false, fmt.Errorf("%w: %s/%s with UID %s", ErrAccountGone, ns, name, uid)
	}
	info := (&apiserverserviceaccount.ServiceAccountInfo{Namespace: ns, Name: name, UID: uid, CredentialID: credentialID(c.ID)}).UserInfo()
	u := info.(*user.DefaultInfo)
	u.Groups = append(u.Groups, user.AllAuthenticated)
	return &authenticator.Response{User: u, Audiences: auds}, true, nil
}

// credentialID is the user's credential ID for a token with ID jti, as
// Kubernetes records it in audit events.
func credentialID(jti string) string {
	if jti == "" {
		return ""
	}
	return "JTI=" + jti
}
