package serving

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// newCSR returns a key and a PEM certificate request for cn in orgs.
func newCSR(t *testing.T, cn string, orgs ...string) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func parseCertPEM(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("no PEM in %q", b)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientCertSigner(t *testing.T) {
	m, err := Prepare(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := m.ClientCertSigner()
	if s == nil || m.ClientCAs() == nil {
		t.Fatal("a generated identity has no client certificate signer")
	}
	_, csr := newCSR(t, "carol", "qa", "dev")
	certPEM, err := s.Sign(csr, 0)
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCertPEM(t, certPEM)
	if cert.Subject.CommonName != "carol" || !slices.Equal(cert.Subject.Organization, []string{"qa", "dev"}) {
		t.Errorf("subject %v", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: m.ClientCAs(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("verify as a client certificate: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: m.ClientCAs(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies for serving")
	}
	if left := time.Until(cert.NotAfter); left < DefaultClientCertValidity-time.Minute || left > DefaultClientCertValidity {
		t.Errorf("default validity %v, want a year", left)
	}
	long, err := s.Sign(csr, 50*DefaultClientCertValidity)
	if err != nil {
		t.Fatal(err)
	}
	if got := parseCertPEM(t, long).NotAfter; !got.Equal(s.ca.cert.NotAfter) {
		t.Errorf("a certificate asked for 50 years ends %v, want the CA's end %v", got, s.ca.cert.NotAfter)
	}

	tampered := bytes.Clone(csr)
	block, _ := pem.Decode(tampered)
	block.Bytes[len(block.Bytes)-3] ^= 0xff
	tampered = pem.EncodeToMemory(block)
	_, noName := newCSR(t, "", "qa")
	_, emptyGroup := newCSR(t, "carol", "qa", "")
	for name, tc := range map[string]struct {
		csr      []byte
		validity time.Duration
		want     string
	}{
		"too short":      {csr, 5 * time.Minute, "shorter than 10m0s"},
		"not PEM":        {[]byte("hello"), 0, "no PEM CERTIFICATE REQUEST"},
		"bad signature":  {tampered, 0, "signature"},
		"no common name": {noName, 0, "common name"},
		"empty group":    {emptyGroup, 0, "organization"},
		"a certificate":  {certPEM, 0, "no PEM CERTIFICATE REQUEST"},
	} {
		if _, err := s.Sign(tc.csr, tc.validity); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}

	// With the user's own serving certificate there is no CA to sign with.
	certFile, keyFile := selfSigned(t, t.TempDir())
	um, err := Prepare(Options{DataDir: t.TempDir(), CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	if um.ClientCertSigner() != nil || um.ClientCAs() != nil {
		t.Error("a server with the user's certificate signs client certificates")
	}
}

// postCert posts a ClientCertificate for csr to the signer as u.
func postCert(t *testing.T, h http.Handler, u user.Info, method string, body any) (int, ClientCertificate, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	r := httptest.NewRequest(method, ClientCertificatesPath, bytes.NewReader(b))
	if u != nil {
		r = r.WithContext(request.WithUser(r.Context(), u))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var cc ClientCertificate
	_ = json.Unmarshal(w.Body.Bytes(), &cc)
	return w.Code, cc, w.Body.String()
}

func TestClientCertHandler(t *testing.T) {
	m, err := Prepare(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h := m.ClientCertSigner()
	ask := func(csr []byte, seconds *int64) ClientCertificate {
		return ClientCertificate{TypeMeta: metav1.TypeMeta{Kind: ClientCertificateKind, APIVersion: ClientCertificateAPIVersion}, Spec: ClientCertificateSpec{Request: csr, ExpirationSeconds: seconds}}
	}
	_, csr := newCSR(t, "carol", "qa")
	_, masters := newCSR(t, "mallory", user.SystemPrivilegedGroup)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"dev", user.AllAuthenticated}}
	hour, short := int64(3600), int64(60)

	code, cc, body := postCert(t, h, AdminUser, http.MethodPost, ask(csr, &hour))
	if code != http.StatusCreated || len(cc.Status.Certificate) == 0 || cc.Kind != ClientCertificateKind {
		t.Fatalf("admin: %d %s", code, body)
	}
	if left := time.Until(parseCertPEM(t, cc.Status.Certificate).NotAfter); left > time.Hour || left < 59*time.Minute {
		t.Errorf("expirationSeconds 3600 gave %v", left)
	}
	if code, _, body := postCert(t, h, AdminUser, http.MethodPost, ask(masters, nil)); code != http.StatusCreated {
		t.Errorf("admin asks for system:masters: %d %s", code, body)
	}
	for _, tc := range []struct {
		name   string
		u      user.Info
		method string
		body   any
		want   int
	}{
		{"GET", AdminUser, http.MethodGet, nil, http.StatusMethodNotAllowed},
		{"no user", nil, http.MethodPost, ask(csr, nil), http.StatusUnauthorized},
		{"not JSON", AdminUser, http.MethodPost, "x", http.StatusBadRequest},
		{"wrong kind", AdminUser, http.MethodPost, ClientCertificate{Spec: ClientCertificateSpec{Request: csr}}, http.StatusBadRequest},
		{"too short", AdminUser, http.MethodPost, ask(csr, &short), http.StatusUnprocessableEntity},
		{"bad request", AdminUser, http.MethodPost, ask([]byte("nope"), nil), http.StatusUnprocessableEntity},
		{"masters by a non-master", alice, http.MethodPost, ask(masters, nil), http.StatusForbidden},
		{"too large", AdminUser, http.MethodPost, ask(bytes.Repeat([]byte("a"), maxCSRBytes), nil), http.StatusRequestEntityTooLarge},
	} {
		if code, _, body := postCert(t, h, tc.u, tc.method, tc.body); code != tc.want {
			t.Errorf("%s: %d, want %d: %s", tc.name, code, tc.want, body)
		}
	}
}

// TestClientCertificateOverTLS: a certificate the server's CA signed
// authenticates as its subject over a real TLS connection; one another CA
// signed fails the handshake; none leaves the request to other credentials.
func TestClientCertificateOverTLS(t *testing.T) {
	m, err := Prepare(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(NewHandler(HandlerOptions{API: echoUser, Token: testToken, ClientCAs: m.ClientCAs(),
		Authorizer: impersonators{"carol": nil}, Logger: slog.New(slog.DiscardHandler)}))
	srv.TLS = m.TLSConfig()
	VerifyClientCerts(srv.TLS, m.ClientCAs())
	srv.StartTLS()
	defer srv.Close()

	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.CAPool(), Certificates: certs}}}
	}
	get := func(c *http.Client) (int, string, error) {
		resp, err := c.Get(srv.URL + "/api")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	key, csr := newCSR(t, "carol", "qa")
	certPEM, err := m.ClientCertSigner().Sign(csr, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := get(client(pair))
	var got userEcho
	if err != nil || code != 200 || json.Unmarshal([]byte(body), &got) != nil ||
		got.Name != "carol" || !slices.Equal(got.Groups, []string{"qa", user.AllAuthenticated}) {
		t.Fatalf("with carol's certificate: %d %s %v", code, body, err)
	}
	if code, _, err := get(client()); err != nil || code != http.StatusUnauthorized {
		t.Errorf("without a certificate or token: %d %v, want 401", code, err)
	}

	other, err := Prepare(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, err := other.ClientCertSigner().Sign(csr, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherPair, _ := tls.X509KeyPair(otherPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	// Go's client sends a certificate only if its issuer is among the CAs
	// the server names, and each CA's name carries the second it was made:
	// send it regardless, as a hostile client would.
	always := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.CAPool(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &otherPair, nil }}}}
	if code, body, err := get(always); err == nil {
		t.Errorf("a certificate of another CA: %d %s, want a failed handshake", code, body)
	}
}

// TestClientCertSignerStored: servers on one store sign with the one CA
// kept there, so a certificate one signed authenticates at the other; with
// the user's serving certificate a server does not sign.
func TestClientCertSignerStored(t *testing.T) {
	st := openStore(t)
	a := mustPrepare(t, st, Options{DataDir: t.TempDir()})
	b := mustPrepare(t, st, Options{DataDir: t.TempDir()})
	_, csr := newCSR(t, "carol", "qa")
	certPEM, err := a.ClientCertSigner().Sign(csr, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseCertPEM(t, certPEM).Verify(x509.VerifyOptions{Roots: b.ClientCAs(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("a certificate one server signed does not verify at the other: %v", err)
	}
	certFile, keyFile := selfSigned(t, t.TempDir())
	if u := mustPrepare(t, st, Options{DataDir: t.TempDir(), CertFile: certFile, KeyFile: keyFile}); u.ClientCertSigner() != nil {
		t.Error("a server with the user's certificate signs client certificates")
	}
}
