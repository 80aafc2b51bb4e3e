package apiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"

	jose "github.com/go-jose/go-jose/v4"
)

// The paths of ServiceAccount issuer discovery, kube-apiserver's: the
// OpenID provider configuration and the JSON Web Key Set its jwks_uri
// names.
const (
	OpenIDConfigPath = "/.well-known/openid-configuration"
	JWKSPath         = "/openid/v1/jwks"
)

// issuerDiscoveryMaxAge is how long clients may cache the documents, in
// seconds (kube-apiserver's for keys read from files).
const issuerDiscoveryMaxAge = 3600

// IssuerDiscovery serves ServiceAccount issuer discovery as kube-apiserver
// does: the OpenID provider configuration at OpenIDConfigPath and the
// public keys that verify ServiceAccount tokens at JWKSPath, so that a
// party outside the cluster can verify them. Who may read them is
// authorization's business (the ClusterRole
// system:service-account-issuer-discovery).
type IssuerDiscovery struct {
	issuer  string
	keys    func(context.Context) map[string]*ecdsa.PublicKey
	jwksURI atomic.Pointer[string]
}

// NewIssuerDiscovery returns the discovery of issuer, whose verifying keys
// keys returns by key ID (for the request whose context it is given). The issuer must be an https URL without query or
// fragment, as OpenID Connect Discovery requires.
func NewIssuerDiscovery(issuer string, keys func(context.Context) map[string]*ecdsa.PublicKey) (*IssuerDiscovery, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("service account issuer discovery: issuer %q: want an https URL without query or fragment", issuer)
	}
	if keys == nil {
		return nil, errors.New("service account issuer discovery: no keys")
	}
	return &IssuerDiscovery{issuer: issuer, keys: keys}, nil
}

// SetJWKSURI sets the configuration's jwks_uri: where the server is
// reached, plus JWKSPath (kube-apiserver's default, from its external
// address). Until it is set, JWKSPath on the issuer's host.
func (d *IssuerDiscovery) SetJWKSURI(uri string) { d.jwksURI.Store(&uri) }

func (d *IssuerDiscovery) jwksURIOrDefault() string {
	if p := d.jwksURI.Load(); p != nil {
		return *p
	}
	u, _ := url.Parse(d.issuer)
	return (&url.URL{Scheme: "https", Host: u.Host, Path: JWKSPath}).String()
}

// Routes are the discovery's routes, for Options.Routes.
func (d *IssuerDiscovery) Routes() []Route {
	return []Route{
		{Pattern: OpenIDConfigPath, Handler: d.serve(d.config, "application/json")},
		{Pattern: JWKSPath, Handler: d.serve(d.keySet, "application/jwk-set+json")},
	}
}

func (d *IssuerDiscovery) serve(doc func(context.Context) ([]byte, error), contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("%s is not supported here", r.Method))
			return
		}
		body, err := doc(r.Context())
		if err != nil {
			writeStatus(w, http.StatusInternalServerError, "InternalError", "the issuer's keys could not be published")
			return
		}
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Cache-Control", "public, max-age="+strconv.Itoa(issuerDiscoveryMaxAge))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	})
}

// openIDConfiguration is the part of the OpenID provider metadata a party
// that verifies ID tokens needs, as kube-apiserver serves it.
type openIDConfiguration struct {
	Issuer        string   `json:"issuer"`
	JWKSURI       string   `json:"jwks_uri"`
	ResponseTypes []string `json:"response_types_supported"`
	SubjectTypes  []string `json:"subject_types_supported"`
	SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
}

func (d *IssuerDiscovery) config(ctx context.Context) ([]byte, error) {
	set, err := d.jwks(ctx)
	if err != nil {
		return nil, err
	}
	var algs []string
	for _, k := range set.Keys {
		if !slices.Contains(algs, k.Algorithm) {
			algs = append(algs, k.Algorithm)
		}
	}
	slices.Sort(algs)
	return json.Marshal(openIDConfiguration{
		Issuer:        d.issuer,
		JWKSURI:       d.jwksURIOrDefault(),
		ResponseTypes: []string{"id_token"},
		SubjectTypes:  []string{"public"},
		SigningAlgs:   algs,
	})
}

func (d *IssuerDiscovery) keySet(ctx context.Context) ([]byte, error) {
	set, err := d.jwks(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(set)
}

// jwks is the public keys as a JSON Web Key Set, in key ID order.
func (d *IssuerDiscovery) jwks(ctx context.Context) (*jose.JSONWebKeySet, error) {
	keys := d.keys(ctx)
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	set := &jose.JSONWebKeySet{}
	for _, id := range slices.Sorted(maps.Keys(keys)) {
		alg, err := signingAlgorithm(keys[id])
		if err != nil {
			return nil, err
		}
		jwk := jose.JSONWebKey{Key: keys[id], KeyID: id, Algorithm: string(alg), Use: "sig"}
		if !jwk.IsPublic() || !jwk.Valid() {
			return nil, fmt.Errorf("key %s: not a valid public key", id)
		}
		set.Keys = append(set.Keys, jwk)
	}
	return set, nil
}

// signingAlgorithm is the JWS algorithm a key signs with.
func signingAlgorithm(pk *ecdsa.PublicKey) (jose.SignatureAlgorithm, error) {
	switch pk.Curve {
	case elliptic.P256():
		return jose.ES256, nil
	case elliptic.P384():
		return jose.ES384, nil
	case elliptic.P521():
		return jose.ES512, nil
	}
	return "", errors.New("an ECDSA key on an unknown curve")
}
