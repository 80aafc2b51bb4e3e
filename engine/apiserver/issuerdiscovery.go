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
	"strings"
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

// IssuerKeys are the keys issuer discovery publishes.
type IssuerKeys interface {
	// PublicKeys returns the keys that verify ServiceAccount tokens, by
	// key ID.
	PublicKeys(context.Context) map[string]*ecdsa.PublicKey
	// Generation returns a number that changes whenever those keys do.
	Generation(context.Context) uint64
}

// IssuerDiscoveryOptions configures NewIssuerDiscovery.
type IssuerDiscoveryOptions struct {
	// Issuer is the issuer of the ServiceAccount tokens: an https URL
	// without query or fragment, as OpenID Connect Discovery requires.
	Issuer string
	// JWKSURI is the configuration's jwks_uri (see CheckJWKSURI); when
	// empty, Issuer followed by JWKSPath, where a party that reached the
	// configuration through the issuer URL finds the keys the same way.
	JWKSURI string
	// Keys are the keys published.
	Keys IssuerKeys
}

// IssuerDiscovery serves ServiceAccount issuer discovery as kube-apiserver
// does: the OpenID provider configuration at OpenIDConfigPath and the
// public keys that verify ServiceAccount tokens at JWKSPath, so that a
// party outside the cluster can verify them. Who may read them is
// authorization's business (the ClusterRole
// system:service-account-issuer-discovery).
//
// Both documents are built once per generation of the keys and served from
// memory until the keys change.
type IssuerDiscovery struct {
	issuer  string
	jwksURI string
	keys    IssuerKeys
	docs    atomic.Pointer[discoveryDocs] // the newest generation built
}

// discoveryDocs are the documents built from one generation of the keys.
type discoveryDocs struct {
	generation uint64
	config     []byte
	keySet     []byte
}

// CheckIssuerURL tells whether issuer may be the issuer of a discovery: an
// https URL with a host and without query or fragment.
func CheckIssuerURL(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("want an https URL with a host and without query or fragment, such as https://issuer.example.com")
	}
	return nil
}

// CheckJWKSURI tells whether uri may be a discovery's jwks_uri: an https
// URL with a host, without fragment or credentials (kube-apiserver
// requires https as well).
func CheckJWKSURI(uri string) error {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Fragment != "" || u.User != nil {
		return errors.New("want an https URL with a host and without fragment or credentials, such as https://issuer.example.com/openid/v1/jwks")
	}
	return nil
}

// NewIssuerDiscovery returns the discovery of opts.Issuer, with its
// documents built from the current keys (an error when there is none).
func NewIssuerDiscovery(ctx context.Context, opts IssuerDiscoveryOptions) (*IssuerDiscovery, error) {
	if err := CheckIssuerURL(opts.Issuer); err != nil {
		return nil, fmt.Errorf("service account issuer discovery: issuer %q: %w", opts.Issuer, err)
	}
	jwksURI := opts.JWKSURI
	if jwksURI == "" {
		jwksURI = strings.TrimSuffix(opts.Issuer, "/") + JWKSPath
	} else if err := CheckJWKSURI(jwksURI); err != nil {
		return nil, fmt.Errorf("service account issuer discovery: jwks_uri: %w", err)
	}
	if opts.Keys == nil {
		return nil, errors.New("service account issuer discovery: no keys")
	}
	d := &IssuerDiscovery{issuer: opts.Issuer, jwksURI: jwksURI, keys: opts.Keys}
	if _, err := d.current(ctx); err != nil {
		return nil, fmt.Errorf("service account issuer discovery: %w", err)
	}
	return d, nil
}

// JWKSURI is the configuration's jwks_uri.
func (d *IssuerDiscovery) JWKSURI() string { return d.jwksURI }

// Routes are the discovery's routes, for Options.Routes.
func (d *IssuerDiscovery) Routes() []Route {
	return []Route{
		{Pattern: OpenIDConfigPath, Handler: d.serve(func(docs *discoveryDocs) []byte { return docs.config }, "application/json")},
		{Pattern: JWKSPath, Handler: d.serve(func(docs *discoveryDocs) []byte { return docs.keySet }, "application/jwk-set+json")},
	}
}

// current returns the documents of the keys' current generation, building
// them when the keys changed since they were last built.
func (d *IssuerDiscovery) current(ctx context.Context) (*discoveryDocs, error) {
	gen := d.keys.Generation(ctx)
	if docs := d.docs.Load(); docs != nil && docs.generation == gen {
		return docs, nil
	}
	docs, err := d.build(ctx, gen)
	if err != nil {
		return nil, err
	}
	// Keep the newest generation: a slower build of an older one does not
	// replace it.
	for {
		old := d.docs.Load()
		if old != nil && old.generation >= gen {
			break
		}
		if d.docs.CompareAndSwap(old, docs) {
			break
		}
	}
	return docs, nil
}

func (d *IssuerDiscovery) build(ctx context.Context, gen uint64) (*discoveryDocs, error) {
	set, err := d.jwks(ctx)
	if err != nil {
		return nil, err
	}
	keySet, err := json.Marshal(set)
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
	config, err := json.Marshal(openIDConfiguration{
		Issuer:        d.issuer,
		JWKSURI:       d.jwksURI,
		ResponseTypes: []string{"id_token"},
		SubjectTypes:  []string{"public"},
		SigningAlgs:   algs,
	})
	if err != nil {
		return nil, err
	}
	return &discoveryDocs{generation: gen, config: config, keySet: keySet}, nil
}

func (d *IssuerDiscovery) serve(doc func(*discoveryDocs) []byte, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("%s is not supported here", r.Method))
			return
		}
		docs, err := d.current(r.Context())
		if err != nil {
			writeStatus(w, http.StatusInternalServerError, "InternalError", "the issuer's keys could not be published")
			return
		}
		body := doc(docs)
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

// jwks is the public keys as a JSON Web Key Set, in key ID order.
func (d *IssuerDiscovery) jwks(ctx context.Context) (*jose.JSONWebKeySet, error) {
	keys := d.keys.PublicKeys(ctx)
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
