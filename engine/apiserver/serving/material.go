package serving

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options says where the security material lives and what it must cover.
type Options struct {
	// DataDir holds the material; required.
	DataDir string
	// Hosts are the DNS names and IP addresses the serving certificate must
	// cover besides 127.0.0.1, ::1 and localhost (the host of the listen
	// address, typically).
	Hosts []string
	// CertFile and KeyFile, when both set, are the user's own serving
	// certificate (PEM, the chain after the leaf) and private key; no CA is
	// created then.
	CertFile, KeyFile string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Material is the security material a server runs with.
type Material struct {
	// Certificate is the serving certificate with its private key.
	Certificate tls.Certificate
	// CAData is the PEM of the CA clients should trust: Setpoint's own CA, or,
	// with the user's certificate, the chain's self-signed root when the file
	// holds one; nil means clients use their system roots.
	CAData []byte
	// Token is the admin bearer token.
	Token string
	// DataDir is where the material lives.
	DataDir string
	// ca is the server's own CA, which signed the serving certificate and
	// signs client certificates; nil with the user's certificate.
	ca *keyPair
}

// DefaultHosts are always in a generated serving certificate.
var DefaultHosts = []string{"127.0.0.1", "::1", "localhost"}

// Prepare loads the security material from opts.DataDir, creating what is
// missing: on first start a CA, a serving certificate and an admin token. On
// later starts it keeps them, re-issuing the serving certificate from the same
// CA only when it no longer covers the hosts or nears expiry.
func Prepare(opts Options) (*Material, error) {
	if opts.DataDir == "" {
		return nil, ErrNoDataDir
	}
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, ErrCertKeyPair
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("prepare security material: %w", err)
	}
	m := &Material{DataDir: opts.DataDir}
	var err error
	if m.Token, err = ensureToken(opts.DataDir); err != nil {
		return nil, fmt.Errorf("prepare security material: %w", err)
	}
	if opts.CertFile != "" {
		err = m.loadUserCert(opts.CertFile, opts.KeyFile)
	} else {
		err = m.ensureGenerated(hostsOf(opts.Hosts), now())
	}
	if err != nil {
		return nil, fmt.Errorf("prepare security material: %w", err)
	}
	return m, nil
}

// hostsOf returns the default hosts plus extra ones, without duplicates or
// wildcard addresses.
func hostsOf(extra []string) []string {
	hosts := slices.Clone(DefaultHosts)
	for _, h := range extra {
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			continue
		}
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

func (m *Material) ensureGenerated(hosts []string, now time.Time) error {
	dir := filepath.Join(m.DataDir, pkiDir)
	ca, err := loadPair(dir, caCertFile, caKeyFile)
	if err != nil {
		return err
	}
	if ca == nil {
		if ca, err = newCA(now); err != nil {
			return err
		}
		if err := storePair(dir, caCertFile, caKeyFile, ca); err != nil {
			return err
		}
	}
	srv, err := loadPair(dir, servingCertFile, servingKeyFile)
	if err != nil {
		return err
	}
	if srv == nil || !servingCertUsable(srv.cert, ca.cert, hosts, now) {
		if srv, err = newServingCert(ca, hosts, now); err != nil {
			return err
		}
		if err := storePair(dir, servingCertFile, servingKeyFile, srv); err != nil {
			return err
		}
	}
	m.CAData, m.ca = ca.certPEM, ca
	m.Certificate, err = tls.X509KeyPair(append(slices.Clone(srv.certPEM), ca.certPEM...), srv.keyPEM)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadMaterial, err)
	}
	return nil
}

func (m *Material) loadUserCert(certFile, keyFile string) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("load --tls-cert-file %s: %w", certFile, err)
	}
	m.Certificate = cert
	// Hand clients the chain's root when the file carries one, so that a
	// self-signed or private-CA certificate works from the kubeconfig alone.
	last, err := x509.ParseCertificate(cert.Certificate[len(cert.Certificate)-1])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadMaterial, err)
	}
	if last.CheckSignatureFrom(last) == nil {
		m.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: last.Raw})
	}
	return nil
}

// CAPool returns a pool holding CAData, or nil when there is none.
func (m *Material) CAPool() *x509.CertPool {
	if len(m.CAData) == 0 {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(m.CAData)
	return pool
}

// TLSConfig returns the server's TLS configuration: TLS 1.2 or later, the
// serving certificate, HTTP/2 and HTTP/1.1.
func (m *Material) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{m.Certificate},
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

// KubeconfigPath is where WriteKubeconfig writes.
func (m *Material) KubeconfigPath() string {
	return filepath.Join(m.DataDir, KubeconfigFile)
}

// Kubeconfig names used in the admin kubeconfig.
const (
	KubeconfigCluster = "setpoint"
	KubeconfigUser    = "setpoint-admin"
	KubeconfigContext = "setpoint"
)

// WriteKubeconfig writes DIR/admin.kubeconfig (mode 0600): the server URL, the
// CA data and the admin token, so that kubectl and setpoint work with it as
// is. It is rewritten on a start that changes it (the URL may change) and
// left alone otherwise.
func (m *Material) WriteKubeconfig(serverURL string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[KubeconfigCluster] = &clientcmdapi.Cluster{
		Server:                   serverURL,
		CertificateAuthorityData: m.CAData,
	}
	cfg.AuthInfos[KubeconfigUser] = &clientcmdapi.AuthInfo{Token: m.Token}
	cfg.Contexts[KubeconfigContext] = &clientcmdapi.Context{
		Cluster:   KubeconfigCluster,
		AuthInfo:  KubeconfigUser,
		Namespace: "default",
	}
	cfg.CurrentContext = KubeconfigContext
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	path := m.KubeconfigPath()
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		// A restart with the same address and identity needs no write, so a
		// server restarted on a full disk still starts (read-only).
		return path, nil
	}
	if err := writeFileAtomic(path, data); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}
