// Package oidctest runs an OpenID Connect issuer on loopback for tests: an
// HTTPS server with a discovery document and a JWKS, and ID tokens signed
// with its RSA key.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Issuer is a running OpenID Connect issuer.
type Issuer struct {
	// URL is the issuer URL, https://127.0.0.1:PORT.
	URL string
	// CAFile is a PEM file of the certificate the issuer serves with.
	CAFile string

	key    *rsa.PrivateKey
	keyID  string
	server *httptest.Server
}

// New starts an issuer that serves until t ends.
func New(t testing.TB) *Issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &Issuer{key: key, keyID: "test-key"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer":                                iss.URL,
			"jwks_uri":                              iss.URL + "/keys",
			"authorization_endpoint":                iss.URL + "/auth",
			"token_endpoint":                        iss.URL + "/token",
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: iss.keyID, Algorithm: "RS256", Use: "sig"}}})
	})
	iss.server = httptest.NewTLSServer(mux)
	t.Cleanup(iss.server.Close)
	iss.URL = iss.server.URL
	iss.CAFile = filepath.Join(t.TempDir(), "oidc-ca.crt")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: iss.server.Certificate().Raw})
	if err := os.WriteFile(iss.CAFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return iss
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Claims are an ID token's claims; Token fills iss, iat and, when unset,
// exp (an hour from now).
type Claims map[string]any

// Token returns an ID token with claims, signed with the issuer's key.
func (iss *Issuer) Token(t testing.TB, claims Claims) string {
	t.Helper()
	return sign(t, iss.key, iss.keyID, iss.URL, claims)
}

// ForgedToken returns an ID token with claims as the issuer would, but
// signed with a key of its own that the issuer's JWKS does not hold.
func (iss *Issuer) ForgedToken(t testing.TB, claims Claims) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, key, iss.keyID, iss.URL, claims)
}

func sign(t testing.TB, key *rsa.PrivateKey, keyID, issuer string, claims Claims) string {
	t.Helper()
	c := Claims{"iss": issuer, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		c[k] = v
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), keyID))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
