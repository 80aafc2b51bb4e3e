package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
)

// TestAuthFlagsValidate: the authentication flags fail with messages that
// name the flag, the file and the line, before the server starts.
func TestAuthFlagsValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.csv", "tok,alice,1,\"dev,ops\"\n")
	bad := write("bad.csv", "tok,alice,1\n\nsecret-x,bob\n")
	notPEM := write("ca.txt", "not a certificate")
	tests := []struct {
		name string
		a    authFlags
		want string // "" for valid
	}{
		{name: "none", a: authFlags{}},
		{name: "token file", a: authFlags{tokenAuthFile: good}},
		{name: "missing token file", a: authFlags{tokenAuthFile: filepath.Join(dir, "nope.csv")}, want: "--token-auth-file: open "},
		{name: "bad token file line", a: authFlags{tokenAuthFile: bad}, want: "bad.csv: serving: bad token file: line 3: want at least 3 fields"},
		{name: "client CA not PEM", a: authFlags{clientCAFile: notPEM}, want: "--client-ca-file " + notPEM + ": the file holds no PEM certificate"},
		{name: "missing client CA", a: authFlags{clientCAFile: filepath.Join(dir, "nope.crt")}, want: "--client-ca-file: open "},
		{name: "oidc over http", a: authFlags{oidc: serving.OIDCOptions{IssuerURL: "http://idp.example.com", ClientID: "setpoint"}}, want: `--oidc-issuer-url "http://idp.example.com": want an https URL`},
		{name: "oidc without client id", a: authFlags{oidc: serving.OIDCOptions{IssuerURL: "https://idp.example.com"}}, want: "--oidc-issuer-url and --oidc-client-id go together"},
		{name: "oidc groups claim alone", a: authFlags{oidc: serving.OIDCOptions{GroupsClaim: "groups"}}, want: "go together"},
		{name: "oidc", a: authFlags{oidc: serving.OIDCOptions{IssuerURL: "https://idp.example.com", ClientID: "setpoint"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.a.validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate: %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "secret-x") {
				t.Errorf("the error quotes a token: %v", err)
			}
		})
	}
}

// TestAuthFlagsBuild: client certificates verify against the server's own
// CA and --client-ca-file's; with the user's serving certificate, only
// against the file's.
func TestAuthFlagsBuild(t *testing.T) {
	own, err := serving.Prepare(serving.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	other, err := serving.Prepare(serving.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, other.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	signed := func(m *serving.Material) *x509.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "carol"}}, key)
		if err != nil {
			t.Fatal(err)
		}
		certPEM, err := m.ClientCertSigner().Sign(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(certPEM)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	verifies := func(pool *x509.CertPool, c *x509.Certificate) bool {
		_, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return pool != nil && err == nil
	}
	ownCert, otherCert := signed(own), signed(other)
	log := slog.New(slog.DiscardHandler)

	auth, err := authFlags{}.build(context.Background(), log, own)
	if err != nil {
		t.Fatal(err)
	}
	if !verifies(auth.clientCAs, ownCert) || verifies(auth.clientCAs, otherCert) {
		t.Error("without --client-ca-file: want the server's own CA only")
	}
	auth, err = authFlags{clientCAFile: caFile}.build(context.Background(), log, own)
	if err != nil {
		t.Fatal(err)
	}
	if !verifies(auth.clientCAs, ownCert) || !verifies(auth.clientCAs, otherCert) {
		t.Error("with --client-ca-file: want both CAs")
	}
	certFile, keyFile := filepath.Join(t.TempDir(), "tls.crt"), filepath.Join(t.TempDir(), "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: own.Certificate.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(own.Certificate.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	user, err := serving.Prepare(serving.Options{DataDir: t.TempDir(), CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	auth, err = authFlags{clientCAFile: caFile}.build(context.Background(), log, user)
	if err != nil {
		t.Fatal(err)
	}
	if verifies(auth.clientCAs, ownCert) || !verifies(auth.clientCAs, otherCert) {
		t.Error("with the user's certificate and --client-ca-file: want the file's CA only")
	}
	if auth, err = (authFlags{}).build(context.Background(), log, user); err != nil || auth.clientCAs != nil {
		t.Errorf("with the user's certificate alone: %v, %v; want no client certificates", auth.clientCAs, err)
	}
}
