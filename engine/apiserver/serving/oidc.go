package serving

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/plugin/pkg/authenticator/token/oidc"
)

// OIDCOptions are kube-apiserver's --oidc-* settings: which OpenID Connect
// issuer's ID tokens authenticate, and how their claims name the user.
type OIDCOptions struct {
	// IssuerURL is the issuer (https); its discovery document is at
	// IssuerURL/.well-known/openid-configuration. Required.
	IssuerURL string
	// ClientID is the audience ID tokens must be issued for. Required.
	ClientID string
	// UsernameClaim holds the user name; "sub" when empty.
	UsernameClaim string
	// UsernamePrefix goes before every user name. When empty, names from a
	// claim other than "email" get IssuerURL and "#", as in
	// kube-apiserver; "-" means no prefix.
	UsernamePrefix string
	// GroupsClaim holds the user's groups (a string or an array of
	// strings); none when empty. GroupsPrefix goes before each group.
	GroupsClaim, GroupsPrefix string
	// CAFile is the PEM of the CAs that sign the issuer's serving
	// certificate; the system's roots when empty.
	CAFile string
}

// Validate checks o without contacting the issuer.
func (o OIDCOptions) Validate() error {
	if o.IssuerURL == "" || o.ClientID == "" {
		return errors.New("--oidc-issuer-url and --oidc-client-id go together")
	}
	u, err := url.Parse(o.IssuerURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("--oidc-issuer-url %q: want an https URL without a query or fragment, such as https://accounts.example.com", o.IssuerURL)
	}
	if o.CAFile != "" {
		if _, err := readCAFile(o.CAFile); err != nil {
			return fmt.Errorf("--oidc-ca-file: %w", err)
		}
	}
	return nil
}

// readCAFile reads a PEM file that must hold at least one certificate.
func readCAFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return b, nil
}

// staticCA hands the OIDC authenticator the CA bundle read at start.
type staticCA []byte

func (c staticCA) CurrentCABundleContent() []byte { return c }

// NewOIDC returns an authenticator of the ID tokens o's issuer signs, with
// Kubernetes' OIDC authenticator: the signature against the issuer's JWKS
// (RS256), the issuer, the audience and the expiry are checked, then the
// claims map to the user. It fetches the discovery document in the
// background until ctx ends, retrying while the issuer is unreachable;
// tokens are refused until it has.
func NewOIDC(ctx context.Context, o OIDCOptions) (authenticator.Token, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	claim := o.UsernameClaim
	if claim == "" {
		claim = "sub"
	}
	prefix := o.UsernamePrefix
	switch {
	case prefix == "-":
		prefix = ""
	case prefix == "" && claim != "email":
		prefix = o.IssuerURL + "#"
	}
	jwt := apiserver.JWTAuthenticator{
		Issuer: apiserver.Issuer{URL: o.IssuerURL, Audiences: []string{o.ClientID}},
		ClaimMappings: apiserver.ClaimMappings{
			Username: apiserver.PrefixedClaimOrExpression{Claim: claim, Prefix: &prefix},
		},
	}
	if o.GroupsClaim != "" {
		groupsPrefix := o.GroupsPrefix
		jwt.ClaimMappings.Groups = apiserver.PrefixedClaimOrExpression{Claim: o.GroupsClaim, Prefix: &groupsPrefix}
	}
	opts := oidc.Options{JWTAuthenticator: jwt, SupportedSigningAlgs: []string{"RS256"}}
	if o.CAFile != "" {
		ca, err := readCAFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-ca-file: %w", err)
		}
		opts.CAContentProvider = staticCA(ca)
	}
	a, err := oidc.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("OIDC authenticator: %w", err)
	}
	return a, nil
}
