package serving

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPrepareFirstStartThenRestartKeepsEverything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := Prepare(Options{DataDir: dir, Hosts: []string{"example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Token) < 40 {
		t.Errorf("token %d characters, want at least 40", len(first.Token))
	}
	files := map[string][]byte{}
	for _, name := range []string{"pki/ca.crt", "pki/ca.key", "pki/serving.crt", "pki/serving.key", "admin.token"} {
		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", name, st.Mode().Perm())
		}
		files[name] = readFile(t, path)
	}
	for _, d := range []string{dir, filepath.Join(dir, "pki")} {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o700 {
			t.Errorf("%s mode %v, want 0700", d, st.Mode().Perm())
		}
	}

	second, err := Prepare(Options{DataDir: dir, Hosts: []string{"example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if second.Token != first.Token {
		t.Error("token changed across restarts")
	}
	if !bytes.Equal(second.CAData, first.CAData) {
		t.Error("CA changed across restarts")
	}
	if !bytes.Equal(second.Certificate.Certificate[0], first.Certificate.Certificate[0]) {
		t.Error("serving certificate changed across restarts")
	}
	for name, want := range files {
		if got := readFile(t, filepath.Join(dir, name)); !bytes.Equal(got, want) {
			t.Errorf("%s rewritten on restart", name)
		}
	}
}

func leaf(t *testing.T, m *Material) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(m.Certificate.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServingCertificateCoversHosts(t *testing.T) {
	m, err := Prepare(Options{DataDir: t.TempDir(), Hosts: []string{"10.1.2.3", "api.example.test", "0.0.0.0", "[::1]"}})
	if err != nil {
		t.Fatal(err)
	}
	cert := leaf(t, m)
	for _, host := range []string{"127.0.0.1", "::1", "localhost", "10.1.2.3", "api.example.test"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: m.CAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
	for _, host := range []string{"0.0.0.0", "other.example.test"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: m.CAPool()}); err == nil {
			t.Errorf("certificate verifies for %s, want it not to", host)
		}
	}
}

func TestServingCertificateReissuedBySameCA(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name    string
		hosts   []string
		now     time.Time
		reissue bool
	}{
		{name: "same hosts, same day", hosts: []string{"a.test"}, now: now, reissue: false},
		{name: "a new host", hosts: []string{"a.test", "b.test"}, now: now, reissue: true},
		{name: "near expiry", hosts: []string{"a.test"}, now: now.Add(servingValidity - renewBefore/2), reissue: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first, err := Prepare(Options{DataDir: dir, Hosts: []string{"a.test"}, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			second, err := Prepare(Options{DataDir: dir, Hosts: tt.hosts, Now: func() time.Time { return tt.now }})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first.CAData, second.CAData) {
				t.Error("CA changed")
			}
			changed := !bytes.Equal(first.Certificate.Certificate[0], second.Certificate.Certificate[0])
			if changed != tt.reissue {
				t.Errorf("re-issued = %v, want %v", changed, tt.reissue)
			}
			for _, h := range tt.hosts {
				if _, err := leaf(t, second).Verify(x509.VerifyOptions{DNSName: h, Roots: second.CAPool(), CurrentTime: tt.now}); err != nil {
					t.Errorf("verify %s: %v", h, err)
				}
			}
		})
	}
}

func TestPrepareRejectsBadInput(t *testing.T) {
	corrupt := t.TempDir()
	if _, err := Prepare(Options{DataDir: corrupt}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corrupt, "pki", "ca.crt"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyToken := t.TempDir()
	if err := os.WriteFile(filepath.Join(emptyToken, "admin.token"), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		want error
	}{
		{name: "no data dir", opts: Options{}, want: ErrNoDataDir},
		{name: "cert without key", opts: Options{DataDir: t.TempDir(), CertFile: "x.crt"}, want: ErrCertKeyPair},
		{name: "corrupt CA", opts: Options{DataDir: corrupt}, want: ErrBadMaterial},
		{name: "empty token", opts: Options{DataDir: emptyToken}, want: ErrBadMaterial},
		{name: "missing user cert", opts: Options{DataDir: t.TempDir(), CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key"}, want: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Prepare(tt.opts)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Prepare: %v, want %v", err, tt.want)
			}
		})
	}
}

// selfSigned writes a self-signed serving certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "users-own"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "own.crt"), filepath.Join(dir, "own.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestPrepareWithUsersOwnCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, t.TempDir())
	m, err := Prepare(Options{DataDir: dir, CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	if got := leaf(t, m).Subject.CommonName; got != "users-own" {
		t.Errorf("serving certificate %q, want the user's", got)
	}
	if !bytes.Equal(m.CAData, readFile(t, certFile)) {
		t.Error("CA data is not the user's self-signed certificate")
	}
	if _, err := os.Stat(filepath.Join(dir, "pki", "ca.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a CA was generated although the user brought a certificate: %v", err)
	}
	// A key that belongs to another certificate is refused.
	_, otherKey := selfSigned(t, t.TempDir())
	if _, err := Prepare(Options{DataDir: dir, CertFile: certFile, KeyFile: otherKey}); err == nil {
		t.Error("mismatched certificate and key accepted")
	}
}

func TestTLSServesWithGeneratedMaterial(t *testing.T) {
	m, err := Prepare(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Proto))
	}))
	srv.TLS = m.TLSConfig()
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()

	for _, tt := range []struct {
		name    string
		max     uint16
		wantErr bool
	}{
		{name: "TLS 1.3", max: tls.VersionTLS13},
		{name: "TLS 1.2", max: tls.VersionTLS12},
		{name: "TLS 1.1 refused", max: tls.VersionTLS11, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
				RootCAs: m.CAPool(), MinVersion: tls.VersionTLS10, MaxVersion: tt.max,
			}}}
			resp, err := c.Get(srv.URL)
			if tt.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatal("handshake succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
}

func TestWriteKubeconfig(t *testing.T) {
	m, err := Prepare(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	path, err := m.WriteKubeconfig("https://127.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig stat: %v %v", st, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("host %q", cfg.Host)
	}
	if cfg.BearerToken != m.Token {
		t.Error("token differs")
	}
	if !bytes.Equal(cfg.TLSClientConfig.CAData, m.CAData) {
		t.Error("CA data differs")
	}
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ns := raw.Contexts[raw.CurrentContext].Namespace; ns != "default" {
		t.Errorf("namespace %q, want default", ns)
	}
}

// TestWriteKubeconfigKeepsAnUnchangedFile checks that a start with the same
// URL and identity leaves the file as it is (a server restarted on a full
// disk must not fail on it), and that a new URL replaces it.
func TestWriteKubeconfigKeepsAnUnchangedFile(t *testing.T) {
	m, err := Prepare(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	inode := func(url string) uint64 {
		t.Helper()
		path, err := m.WriteKubeconfig(url)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	first := inode("https://127.0.0.1:6443")
	if again := inode("https://127.0.0.1:6443"); again != first {
		t.Errorf("an unchanged kubeconfig was written again (inode %d, then %d)", first, again)
	}
	if moved := inode("https://127.0.0.1:7443"); moved == first {
		t.Error("a kubeconfig with a new URL was not written")
	}
}
