package test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestServiceAccountIssuerDiscovery reads the ServiceAccount issuer's
// OpenID configuration and keys from a real server as kube-apiserver
// serves them and as a relying party finds them: the configuration at the
// issuer URL, the keys at its jwks_uri, which follows the issuer
// (--service-account-issuer) and not the listening address, here a
// wildcard one. A ServiceAccount may read them (the ClusterRole
// system:service-account-issuer-discovery, bound to
// system:serviceaccounts), a user without a binding may not, a request
// without credentials is refused, and a token the server issued verifies
// with the published keys. A --service-account-jwks-uri that is not an
// https URL is refused at start.
func TestServiceAccountIssuerDiscovery(t *testing.T) {
	bin, err := testserver.Binary()
	if err != nil {
		t.Fatal(err)
	}
	refusedCtx, cancelRefused := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelRefused()
	refusedOut, err := exec.CommandContext(refusedCtx, bin, "server", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--service-account-jwks-uri", "http://keys.example.com/openid/v1/jwks").CombinedOutput()
	if want := `--service-account-jwks-uri "http://keys.example.com/openid/v1/jwks": want an https URL`; err == nil || !strings.Contains(string(refusedOut), want) {
		t.Errorf("server with an http --service-account-jwks-uri: %v, output lacks %q:\n%s", err, want, refusedOut)
	}

	addr, err := testserver.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	// localhost: an address the listening one does not name, which the
	// serving certificate covers.
	issuer := "https://localhost:" + port
	s := testserver.Start(t, testserver.Options{Args: []string{"--addr", "0.0.0.0:" + port, "--service-account-issuer", issuer}})
	getURL := func(u, token string, h http.Header) (int, http.Header, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range h {
			req.Header[k] = v
		}
		c := s.HTTPClient()
		defer c.CloseIdleConnections()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	get := func(path, token string, h http.Header) (int, http.Header, []byte) {
		t.Helper()
		return getURL(s.URL+path, token, h)
	}
	for _, args := range [][]string{{"create", "namespace", "team"}, {"create", "serviceaccount", "robot", "-n", "team"}} {
		if out, errOut, err := s.Kubectl(args...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s%s", args, err, out, errOut)
		}
	}
	out, errOut, err := s.Kubectl("create", "token", "robot", "-n", "team")
	if err != nil {
		t.Fatalf("kubectl create token: %v\n%s", err, errOut)
	}
	tok := strings.TrimSpace(out)

	code, h, body := getURL(issuer+"/.well-known/openid-configuration", tok, nil)
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "public, max-age=3600" {
		t.Fatalf("configuration as a ServiceAccount: %d %s %s", code, h.Get("Content-Type"), body)
	}
	var cfg struct {
		Issuer  string   `json:"issuer"`
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Issuer != issuer || cfg.JWKSURI != issuer+"/openid/v1/jwks" || len(cfg.Algs) != 1 || cfg.Algs[0] != "ES256" {
		t.Errorf("configuration %s (issuer %s, server %s)", body, issuer, s.URL)
	}

	code, h, body = getURL(cfg.JWKSURI, tok, nil)
	if code != http.StatusOK || h.Get("Content-Type") != "application/jwk-set+json" || h.Get("Cache-Control") != "public, max-age=3600" {
		t.Fatalf("keys as a ServiceAccount: %d %s %s", code, h.Get("Content-Type"), body)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		t.Fatal(err)
	}
	jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	keys := set.Key(jws.Signatures[0].Header.KeyID)
	if len(keys) != 1 || !keys[0].IsPublic() {
		t.Fatalf("the token's key %q in %s", jws.Signatures[0].Header.KeyID, body)
	}
	if _, err := jws.Verify(keys[0]); err != nil {
		t.Errorf("the token does not verify with the published key: %v", err)
	}

	if code, _, body := get("/openid/v1/jwks", s.Token, http.Header{"Impersonate-User": {"nobody"}}); code != http.StatusForbidden {
		t.Errorf("keys as a user without a binding: %d %s, want 403", code, body)
	}
	if code, _, body := get("/.well-known/openid-configuration", "", nil); code != http.StatusUnauthorized {
		t.Errorf("configuration without credentials: %d %s, want 401", code, body)
	}
}
