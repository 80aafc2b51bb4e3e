package serviceaccount

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
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

// Secrets reads the Secrets tokens are bound to; engine.Service
// implements it.
type Secrets interface {
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error)
}

// secrets is the resource a token may be bound to.
var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

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
	secrets   Secrets
	now       func() time.Time
	// verified holds the tokens whose signature and claims verified, by
	// SHA-256, until they expire.
	verified *utilcache.LRUExpireCache
}

var _ authenticator.Token = (*Authenticator)(nil)

// AuthenticatorOptions configures NewAuthenticator.
type AuthenticatorOptions struct {
	// Keys verify the tokens; required.
	Keys *Keys
	// Accounts tells which ServiceAccounts exist; required.
	Accounts Accounts
	// Secrets reads the Secrets tokens are bound to; without it a token
	// bound to a Secret is refused.
	Secrets Secrets
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
	return &Authenticator{
		keys: opts.Keys, issuer: opts.Issuer, audiences: slices.Clone(opts.Audiences), accounts: opts.Accounts, secrets: opts.Secrets, now: opts.Now,
		verified: utilcache.NewLRUExpireCacheWithClock(verifiedCacheSize, clockFunc(opts.Now)),
	}, nil
}

// Audiences returns the audiences the server accepts, the default of a
// TokenRequest that names none.
func (a *Authenticator) Audiences() []string { return slices.Clone(a.audiences) }

// verifiedCacheSize bounds how many verified tokens Authenticator keeps.
const verifiedCacheSize = 4096

// verified is what a token's signature and claims established; it holds
// until exp, while the ServiceAccount exists with uid.
type verified struct {
	namespace, name, uid, id string
	audiences                []string
	exp                      time.Time
	secret                   *ref // the Secret it is bound to, if any
}

// AuthenticateToken verifies raw and returns the ServiceAccount's user:
// system:serviceaccount:NS:NAME in system:serviceaccounts,
// system:serviceaccounts:NS and system:authenticated, with the token's ID
// as its credential ID. A token whose signature and claims verified is
// remembered (by its SHA-256, until it expires), so that its next requests
// skip the signature check; whether its ServiceAccount exists with its UID
// is checked on every request.
func (a *Authenticator) AuthenticateToken(ctx context.Context, raw string) (*authenticator.Response, bool, error) {
	if strings.Count(raw, ".") != 2 {
		return nil, false, nil
	}
	sum := sha256.Sum256([]byte(raw))
	now := a.now()
	var v *verified
	if cached, ok := a.verified.Get(sum); ok {
		v = cached.(*verified)
	} else {
		var err error
		if v, err = a.verify(ctx, raw, now); v == nil || err != nil {
			return nil, false, err
		}
		a.verified.Add(sum, v, v.exp.Sub(now))
	}
	if !now.Before(v.exp) {
		return nil, false, fmt.Errorf("%w: %w", ErrInvalidToken, jwt.ErrExpired)
	}
	have, ok, err := a.accounts.UID(ctx, v.namespace, v.name)
	if err != nil {
		return nil, false, err
	}
	if !ok || have != v.uid {
		return nil, false, fmt.Errorf("%w: %s/%s with UID %s", ErrAccountGone, v.namespace, v.name, v.uid)
	}
	if v.secret != nil {
		if err := a.checkSecret(ctx, v, now); err != nil {
			return nil, false, err
		}
	}
	info := (&apiserverserviceaccount.ServiceAccountInfo{Namespace: v.namespace, Name: v.name, UID: v.uid, CredentialID: credentialID(v.id)}).UserInfo()
	u := info.(*user.DefaultInfo)
	u.Groups = append(u.Groups, user.AllAuthenticated)
	return &authenticator.Response{User: u, Audiences: slices.Clone(v.audiences)}, true, nil
}

// verify checks raw's signature and claims at now. It returns nil and no
// error for a token that is not this issuer's.
func (a *Authenticator) verify(ctx context.Context, raw string, now time.Time) (*verified, error) {
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, nil
	}
	var unverified jwt.Claims
	if tok.UnsafeClaimsWithoutVerification(&unverified) != nil || unverified.Issuer != a.issuer {
		return nil, nil
	}
	if len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: want one signature", ErrInvalidToken)
	}
	pub, ok := a.keys.verifying(ctx, tok.Headers[0].KeyID)
	if !ok {
		return nil, ErrUnknownKey
	}
	var c claims
	if err := tok.Claims(pub, &c); err != nil {
		return nil, fmt.Errorf("%w: the signature does not verify", ErrInvalidToken)
	}
	if err := c.Claims.ValidateWithLeeway(jwt.Expected{Issuer: a.issuer, Time: now}, clockSkew); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if c.Expiry == nil || !now.Before(c.Expiry.Time()) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, jwt.ErrExpired)
	}
	var auds []string
	for _, aud := range c.Audience {
		if slices.Contains(a.audiences, aud) && !slices.Contains(auds, aud) {
			auds = append(auds, aud)
		}
	}
	if len(auds) == 0 {
		return nil, ErrAudience
	}
	k := c.Kubernetes
	v := &verified{namespace: k.Namespace, name: k.ServiceAccount.Name, uid: k.ServiceAccount.UID, id: c.ID, audiences: auds, exp: c.Expiry.Time(), secret: k.Secret}
	if v.namespace == "" || v.name == "" || v.uid == "" || c.Subject != apiserverserviceaccount.MakeUsername(v.namespace, v.name) {
		return nil, fmt.Errorf("%w: the claims name no ServiceAccount", ErrInvalidToken)
	}
	if v.secret != nil && (v.secret.Name == "" || v.secret.UID == "") {
		return nil, fmt.Errorf("%w: the claims name no Secret", ErrInvalidToken)
	}
	return v, nil
}

// checkSecret checks that the Secret v is bound to exists with its UID
// and was not deleted more than the leeway ago, as Kubernetes checks it.
// It reads the Secret on every request: only bound tokens pay for it.
func (a *Authenticator) checkSecret(ctx context.Context, v *verified, now time.Time) error {
	if a.secrets == nil {
		return fmt.Errorf("%w: tokens bound to a Secret are not accepted here", ErrInvalidToken)
	}
	s, err := a.secrets.Get(ctx, secrets, v.namespace, v.secret.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: service account token has been invalidated", ErrInvalidToken)
	case err != nil:
		return err
	case string(s.GetUID()) != v.secret.UID:
		return fmt.Errorf("%w: secret UID (%s) does not match service account secret ref claim (%s)", ErrInvalidToken, s.GetUID(), v.secret.UID)
	}
	if d := s.GetDeletionTimestamp(); d != nil && d.Time.Before(now.Add(-clockSkew)) {
		return fmt.Errorf("%w: service account token has been invalidated", ErrInvalidToken)
	}
	return nil
}

// clockFunc is a clock for the cache of verified tokens.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// credentialID is the user's credential ID for a token with ID jti, as
// Kubernetes records it in audit events.
func credentialID(jti string) string {
	if jti == "" {
		return ""
	}
	return "JTI=" + jti
}
