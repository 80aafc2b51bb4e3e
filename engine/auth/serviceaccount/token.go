package serviceaccount

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/apimachinery/pkg/util/uuid"
	apiserverserviceaccount "k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// Token lifetimes, as the TokenRequest API bounds them.
const (
	// DefaultExpiration is a token's lifetime when the request names none
	// (TokenRequest's default expirationSeconds).
	DefaultExpiration = time.Hour
	// MinExpiration is the shortest lifetime a request may ask for, as
	// Kubernetes validates it.
	MinExpiration = 10 * time.Minute
	// DefaultMaxExpiration is the longest lifetime a token gets: a request
	// for more gets this much, as kube-apiserver's
	// --service-account-max-token-expiration does.
	DefaultMaxExpiration = 48 * time.Hour
)

// DefaultIssuer is the issuer (iss) of the tokens and, by default, the one
// audience the server accepts: the name Kubernetes gives its API server
// inside a cluster.
const DefaultIssuer = "https://kubernetes.default.svc"

// claims are a token's claims: the registered ones and Kubernetes' own.
type claims struct {
	jwt.Claims
	Kubernetes kubernetesClaims `json:"kubernetes.io"`
}

// kubernetesClaims is the "kubernetes.io" claim of Kubernetes'
// ServiceAccount tokens.
type kubernetesClaims struct {
	Namespace      string `json:"namespace"`
	ServiceAccount ref    `json:"serviceaccount"`
	// Secret is the Secret the token is bound to, if any: the token
	// works while it exists with this UID.
	Secret *ref `json:"secret,omitempty"`
}

type ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// Issuer signs ServiceAccount tokens with the current key of its Keys.
type Issuer struct {
	keys   *Keys
	issuer string
	now    func() time.Time
}

// IssuerOptions configures NewIssuer.
type IssuerOptions struct {
	// Keys sign the tokens; required.
	Keys *Keys
	// Issuer is the tokens' iss; DefaultIssuer when empty.
	Issuer string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// NewIssuer returns an Issuer.
func NewIssuer(opts IssuerOptions) (*Issuer, error) {
	if opts.Keys == nil || opts.Keys.signing() == nil {
		return nil, errors.New("serviceaccount: NewIssuer needs a signing key")
	}
	if opts.Issuer == "" {
		opts.Issuer = DefaultIssuer
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Issuer{keys: opts.Keys, issuer: opts.Issuer, now: opts.Now}, nil
}

// Request is what a token is issued for.
type Request struct {
	// Namespace, Name and UID name the ServiceAccount.
	Namespace, Name, UID string
	// Audiences are the token's aud; required.
	Audiences []string
	// Lifetime is how long the token is valid from now.
	Lifetime time.Duration
	// Secret, when set, binds the token to the Secret of this name and
	// UID in Namespace, as a TokenRequest's boundObjectRef does: the
	// token stops working once the Secret is deleted or replaced.
	Secret *BoundObject
}

// BoundObject names the object a token is bound to.
type BoundObject struct {
	Name, UID string
}

// Issue returns a signed token for req and when it expires.
func (i *Issuer) Issue(req Request) (string, time.Time, error) {
	if req.Namespace == "" || req.Name == "" || req.UID == "" || len(req.Audiences) == 0 || req.Lifetime <= 0 {
		return "", time.Time{}, errors.New("serviceaccount: a token needs a namespace, name, UID, audiences and a lifetime")
	}
	key := i.keys.signing()
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key.key, KeyID: key.id}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("serviceaccount: signer: %w", err)
	}
	// Whole seconds, as every JWT time is.
	now := i.now().Truncate(time.Second)
	exp := now.Add(req.Lifetime)
	if req.Secret != nil && (req.Secret.Name == "" || req.Secret.UID == "") {
		return "", time.Time{}, errors.New("serviceaccount: a token bound to a Secret needs its name and UID")
	}
	c := claims{
		Claims: jwt.Claims{
			Issuer:    i.issuer,
			Subject:   apiserverserviceaccount.MakeUsername(req.Namespace, req.Name),
			Audience:  jwt.Audience(req.Audiences),
			Expiry:    jwt.NewNumericDate(exp),
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ID:        string(uuid.NewUUID()),
		},
		Kubernetes: kubernetesClaims{
			Namespace:      req.Namespace,
			ServiceAccount: ref{Name: req.Name, UID: req.UID},
		},
	}
	if req.Secret != nil {
		c.Kubernetes.Secret = &ref{Name: req.Secret.Name, UID: req.Secret.UID}
	}
	tok, err := jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("serviceaccount: sign a token: %w", err)
	}
	return tok, exp, nil
}
