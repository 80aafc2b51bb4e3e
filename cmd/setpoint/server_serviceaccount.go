package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/apiserver"
	"github.com/setpoint-dev/setpoint/engine/auth/serviceaccount"
	"github.com/setpoint-dev/setpoint/store"
)

// serviceAccountFlags are `setpoint server`'s flags for ServiceAccount
// tokens, named as kube-apiserver names them. Zero values stand for the
// defaults, so that options built without the flags work.
type serviceAccountFlags struct {
	issuer        string
	audiences     []string
	maxExpiration time.Duration
	rotateKey     bool
	jwksURI       string
}

func (s *serviceAccountFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.issuer, "service-account-issuer", serviceaccount.DefaultIssuer, "the issuer (iss) of the ServiceAccount tokens the server signs, and the only one whose tokens it verifies as ServiceAccount tokens")
	f.StringSliceVar(&s.audiences, "api-audiences", nil, "the audiences a ServiceAccount token must name one of, comma-separated, and those of a token whose TokenRequest names none; the default is --service-account-issuer")
	f.DurationVar(&s.maxExpiration, "service-account-max-token-expiration", serviceaccount.DefaultMaxExpiration, "the longest a ServiceAccount token lives: a TokenRequest for longer gets this much; also how long a signing key replaced by --service-account-key-rotate keeps verifying")
	f.StringVar(&s.jwksURI, "service-account-jwks-uri", "", "the jwks_uri of the issuer discovery document at /.well-known/openid-configuration: where relying parties fetch the keys that verify ServiceAccount tokens, an https URL; set it when they reach the keys by another address than the issuer URL (a proxy, a copy of the keys); the default is --service-account-issuer followed by /openid/v1/jwks. Discovery is served only for an https --service-account-issuer")
	f.BoolVar(&s.rotateKey, "service-account-key-rotate", false, "at this start, make a new ServiceAccount token signing key current; tokens the older keys signed keep verifying until they expire (every replica on the store reads the new key when it first meets a token it signed)")
}

func (s *serviceAccountFlags) validate() error {
	if s.maxExpiration != 0 && s.maxExpiration < serviceaccount.MinExpiration {
		return fmt.Errorf("--service-account-max-token-expiration %v: want at least %v, the shortest a token may live", s.maxExpiration, serviceaccount.MinExpiration)
	}
	if slices.Contains(s.audiences, "") {
		return fmt.Errorf("--api-audiences %q: an audience may not be empty", s.audiences)
	}
	if s.jwksURI != "" {
		if err := apiserver.CheckJWKSURI(s.jwksURI); err != nil {
			return fmt.Errorf("--service-account-jwks-uri %q: %w", redactURL(s.jwksURI), err)
		}
		issuer := cmp.Or(s.issuer, serviceaccount.DefaultIssuer)
		if err := apiserver.CheckIssuerURL(issuer); err != nil {
			return fmt.Errorf("--service-account-jwks-uri is set, but issuer discovery is served only for an https --service-account-issuer; --service-account-issuer %q: %w", issuer, err)
		}
	}
	return nil
}

// redactURL is s with any password replaced, for an error message.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(not a URL)"
	}
	return u.Redacted()
}

// serviceAccountTokens are the parts of ServiceAccount tokens: the cache of
// ServiceAccounts a watch keeps current (run by pluginAPI.Run), the
// authenticator of their tokens and the handler of the serviceaccounts/token
// subresource.
type serviceAccountTokens struct {
	cache   *serviceaccount.Cache
	auth    *serviceaccount.Authenticator
	handler http.Handler
	// discovery serves the issuer's OpenID configuration and keys; nil
	// when the issuer is not an https URL, as kube-apiserver skips it.
	discovery *apiserver.IssuerDiscovery
}

// discoveryRoutes are the routes of the issuer discovery, if served.
func (t *serviceAccountTokens) discoveryRoutes() []apiserver.Route {
	if t.discovery == nil {
		return nil
	}
	return t.discovery.Routes()
}

// newServiceAccountTokens loads the signing keys from st (creating the
// first, or rotating with the flag) and builds the token parts over svc.
func newServiceAccountTokens(ctx context.Context, st store.Store, svc *engine.Service, s serviceAccountFlags, log *slog.Logger) (*serviceAccountTokens, error) {
	if s.issuer == "" {
		s.issuer = serviceaccount.DefaultIssuer
	}
	if s.maxExpiration == 0 {
		s.maxExpiration = serviceaccount.DefaultMaxExpiration
	}
	keys, err := serviceaccount.LoadKeys(ctx, st, serviceaccount.KeysOptions{Rotate: s.rotateKey, MaxTokenLifetime: s.maxExpiration})
	if err != nil {
		return nil, err
	}
	if s.rotateKey {
		log.Info("made a new ServiceAccount signing key current", "key_id", keys.CurrentID(), "keys", len(keys.IDs()))
	}
	issuer, err := serviceaccount.NewIssuer(serviceaccount.IssuerOptions{Keys: keys, Issuer: s.issuer})
	if err != nil {
		return nil, err
	}
	cache := serviceaccount.NewCache(svc, log)
	auth, err := serviceaccount.NewAuthenticator(serviceaccount.AuthenticatorOptions{Keys: keys, Accounts: cache, Secrets: svc, Issuer: s.issuer, Audiences: s.audiences})
	if err != nil {
		return nil, err
	}
	handler, err := apiserver.NewTokenRequestHandler(apiserver.TokenRequestOptions{
		Engine: svc, Audiences: auth.Audiences(), MaxLifetime: s.maxExpiration,
		Issue: func(_ context.Context, req serviceaccount.Request) (string, time.Time, error) {
			return issuer.Issue(req)
		},
	})
	if err != nil {
		return nil, err
	}
	discovery, err := apiserver.NewIssuerDiscovery(ctx, apiserver.IssuerDiscoveryOptions{Issuer: s.issuer, JWKSURI: s.jwksURI, Keys: keys})
	switch {
	case err != nil && s.jwksURI != "":
		return nil, err
	case err != nil:
		log.Warn("ServiceAccount issuer discovery is not served", "err", err)
		discovery = nil
	default:
		log.Info("serving ServiceAccount issuer discovery", "issuer", s.issuer, "jwks_uri", redactURL(discovery.JWKSURI()))
	}
	return &serviceAccountTokens{cache: cache, auth: auth, handler: handler, discovery: discovery}, nil
}
