package apiserver

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/engine/auth/serviceaccount"
)

// TestIssuerDiscovery checks the OpenID configuration and the JSON Web Key
// Set as kube-apiserver serves them: their fields, content types and cache
// headers, every verifying key published (public parts only), a token the
// issuer signed verified with the published set, and the refusals.
func TestIssuerDiscovery(t *testing.T) {
	var privs []*ecdsa.PrivateKey
	for range 2 {
		k, err := serviceaccount.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		privs = append(privs, k)
	}
	keys := serviceaccount.NewKeys(privs...)
	pub := keys.PublicKeys
	if _, err := NewIssuerDiscovery("http://issuer.example", pub); err == nil {
		t.Error("an http issuer: no error")
	}
	if _, err := NewIssuerDiscovery("https://issuer.example?x=1", pub); err == nil {
		t.Error("an issuer with a query: no error")
	}
	d, err := NewIssuerDiscovery(serviceaccount.DefaultIssuer, pub)
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]http.Handler{}
	for _, rt := range d.Routes() {
		routes[rt.Pattern] = rt.Handler
	}
	get := func(path, method string) *httptest.ResponseRecorder {
		t.Helper()
		h := routes[path]
		if h == nil {
			t.Fatalf("no route %s", path)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w
	}

	check := func(jwksURI string) {
		t.Helper()
		w := get(OpenIDConfigPath, "GET")
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Cache-Control") != "public, max-age=3600" {
			t.Fatalf("config: %d %v %s", w.Code, w.Header(), w.Body)
		}
		var got map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"issuer": serviceaccount.DefaultIssuer, "jwks_uri": jwksURI,
			"response_types_supported": []any{"id_token"}, "subject_types_supported": []any{"public"},
			"id_token_signing_alg_values_supported": []any{"ES256"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("config (-want +got):\n%s", diff)
		}
	}
	check("https://kubernetes.default.svc/openid/v1/jwks")
	d.SetJWKSURI("https://127.0.0.1:6443" + JWKSPath)
	check("https://127.0.0.1:6443/openid/v1/jwks")

	w := get(JWKSPath, "GET")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/jwk-set+json" || w.Header().Get("Cache-Control") != "public, max-age=3600" {
		t.Fatalf("jwks: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if strings.Contains(w.Body.String(), `"d"`) {
		t.Fatalf("the key set holds a private key: %s", w.Body)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(w.Body.Bytes(), &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 2 {
		t.Fatalf("%d keys, want 2: %s", len(set.Keys), w.Body)
	}
	for _, k := range set.Keys {
		if !k.IsPublic() || k.Use != "sig" || k.Algorithm != "ES256" || (k.KeyID != serviceaccount.KeyID(&privs[0].PublicKey) && k.KeyID != serviceaccount.KeyID(&privs[1].PublicKey)) {
			t.Errorf("key %+v", k)
		}
	}

	iss, err := serviceaccount.NewIssuer(serviceaccount.IssuerOptions{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := iss.Issue(serviceaccount.Request{Namespace: "ns", Name: "robot", UID: "u1", Audiences: []string{"x"}, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	keysByID := set.Key(jws.Signatures[0].Header.KeyID)
	if len(keysByID) != 1 {
		t.Fatalf("the token's key %q: %d in the set", jws.Signatures[0].Header.KeyID, len(keysByID))
	}
	if _, err := jws.Verify(keysByID[0]); err != nil {
		t.Errorf("the token does not verify with the published key: %v", err)
	}

	if w := get(JWKSPath, "HEAD"); w.Code != 200 || w.Body.Len() != 0 {
		t.Errorf("HEAD: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := get(OpenIDConfigPath, "POST"); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", w.Code)
	}
	empty, err := NewIssuerDiscovery(serviceaccount.DefaultIssuer, func(context.Context) map[string]*ecdsa.PublicKey { return nil })
	if err != nil {
		t.Fatal(err)
	}
	w = httptest.NewRecorder()
	empty.Routes()[1].Handler.ServeHTTP(w, httptest.NewRequest("GET", JWKSPath, nil))
	if w.Code != http.StatusInternalServerError {
		t.Errorf("no keys: %d, want 500", w.Code)
	}
}
