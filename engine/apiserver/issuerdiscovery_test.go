package apiserver

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/engine/auth/serviceaccount"
	"github.com/setpoint-dev/setpoint/store/badger"
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
	ctx := context.Background()
	for _, tc := range []struct{ name, issuer, jwksURI string }{
		{name: "an http issuer", issuer: "http://issuer.example"},
		{name: "an issuer with a query", issuer: "https://issuer.example?x=1"},
		{name: "an issuer without a host", issuer: "https:///cluster"},
		{name: "an http jwks_uri", issuer: serviceaccount.DefaultIssuer, jwksURI: "http://keys.example/jwks"},
		{name: "a jwks_uri without a host", issuer: serviceaccount.DefaultIssuer, jwksURI: "https:///jwks"},
		{name: "a jwks_uri with credentials", issuer: serviceaccount.DefaultIssuer, jwksURI: "https://user:secret@keys.example/jwks"},
	} {
		_, err := NewIssuerDiscovery(ctx, IssuerDiscoveryOptions{Issuer: tc.issuer, JWKSURI: tc.jwksURI, Keys: keys})
		if err == nil {
			t.Errorf("%s: no error", tc.name)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error quotes the credentials: %v", tc.name, err)
		}
	}
	if _, err := NewIssuerDiscovery(ctx, IssuerDiscoveryOptions{Issuer: serviceaccount.DefaultIssuer, Keys: serviceaccount.NewKeys()}); err == nil {
		t.Error("no keys: no error")
	}
	for _, tc := range []struct{ issuer, jwksURI, want string }{
		{issuer: serviceaccount.DefaultIssuer, want: "https://kubernetes.default.svc/openid/v1/jwks"},
		{issuer: "https://issuer.example/cluster-a/", want: "https://issuer.example/cluster-a/openid/v1/jwks"},
		{issuer: "https://issuer.example", jwksURI: "https://keys.example:8443/jwks", want: "https://keys.example:8443/jwks"},
	} {
		d, err := NewIssuerDiscovery(ctx, IssuerDiscoveryOptions{Issuer: tc.issuer, JWKSURI: tc.jwksURI, Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.JWKSURI(); got != tc.want {
			t.Errorf("issuer %s, --service-account-jwks-uri %q: jwks_uri %s, want %s", tc.issuer, tc.jwksURI, got, tc.want)
		}
	}
	d, err := NewIssuerDiscovery(ctx, IssuerDiscoveryOptions{Issuer: serviceaccount.DefaultIssuer, Keys: keys})
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
}

// countingKeys counts how often the discovery reads the keys to build its
// documents.
type countingKeys struct {
	*serviceaccount.Keys
	reads atomic.Int64
}

func (k *countingKeys) PublicKeys(ctx context.Context) map[string]*ecdsa.PublicKey {
	k.reads.Add(1)
	return k.Keys.PublicKeys(ctx)
}

// TestIssuerDiscoveryBuildsOncePerKeySet: the documents are built once for
// a set of keys and served from memory, under concurrent requests too, and
// built again, with the new key published, once another replica's rotation
// is read from the store.
func TestIssuerDiscoveryBuildsOncePerKeySet(t *testing.T) {
	ctx := context.Background()
	st, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	loaded, err := serviceaccount.LoadKeys(ctx, st, serviceaccount.KeysOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	keys := &countingKeys{Keys: loaded}
	d, err := NewIssuerDiscovery(ctx, IssuerDiscoveryOptions{Issuer: "https://issuer.example", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	jwks := d.Routes()[1].Handler
	get := func() (*jose.JSONWebKeySet, error) {
		w := httptest.NewRecorder()
		jwks.ServeHTTP(w, httptest.NewRequest("GET", JWKSPath, nil))
		if w.Code != http.StatusOK {
			return nil, fmt.Errorf("jwks: %d %s", w.Code, w.Body)
		}
		var set jose.JSONWebKeySet
		return &set, json.Unmarshal(w.Body.Bytes(), &set)
	}
	hammer := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				for range 20 {
					if _, err := get(); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	hammer()
	if n := keys.reads.Load(); n != 1 {
		t.Fatalf("the keys were read %d times for 160 requests and one key set, want 1 (at the start)", n)
	}

	rotated, err := serviceaccount.LoadKeys(ctx, st, serviceaccount.KeysOptions{Now: clock, Rotate: true})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Second) // the store may be read again
	mu.Unlock()
	hammer()
	if n := keys.reads.Load(); n < 2 || n > 9 {
		t.Fatalf("the keys were read %d times in all after one rotation, want 2 (or a few more when requests raced)", n)
	}
	set, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 2 || len(set.Key(rotated.CurrentID())) != 1 {
		t.Fatalf("after the rotation: %d keys, the new key %s among them: %v", len(set.Keys), rotated.CurrentID(), len(set.Key(rotated.CurrentID())) == 1)
	}
}
