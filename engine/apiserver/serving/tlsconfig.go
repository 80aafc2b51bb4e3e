package serving

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	cliflag "k8s.io/component-base/cli/flag"
)

// DefaultTLSMinVersion is the least TLS version served by default, as
// kube-apiserver's --tls-min-version defaults it.
const DefaultTLSMinVersion = "VersionTLS12"

// DefaultTLSCipherSuites are the TLS 1.2 suites served by default: forward
// secret (ECDHE) and authenticated encryption (AES-GCM, ChaCha20-Poly1305)
// only, none with CBC or SHA-1, which Go would otherwise also offer. TLS 1.3
// suites are all modern and not configurable in Go.
var DefaultTLSCipherSuites = []string{
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}

// TLSOptions are the protocol settings of the serving TLS configuration, by
// kube-apiserver's names (--tls-min-version, --tls-cipher-suites).
type TLSOptions struct {
	// MinVersion is VersionTLS12 or VersionTLS13 (VersionTLS10 and
	// VersionTLS11 are accepted, as kube-apiserver does);
	// DefaultTLSMinVersion when empty.
	MinVersion string
	// CipherSuites are the TLS 1.2 (and older) suites by their IANA names;
	// DefaultTLSCipherSuites when empty.
	CipherSuites []string
}

// Apply sets cfg's minimum version and cipher suites, or says which value
// is not known.
func (o TLSOptions) Apply(cfg *tls.Config) error {
	name := o.MinVersion
	if name == "" {
		name = DefaultTLSMinVersion
	}
	v, err := cliflag.TLSVersion(name)
	if err != nil {
		return fmt.Errorf("--tls-min-version %q: want one of %s", name, strings.Join(cliflag.TLSPossibleVersions(), ", "))
	}
	names := o.CipherSuites
	if len(names) == 0 {
		names = DefaultTLSCipherSuites
	}
	suites, err := cliflag.TLSCipherSuites(names)
	if err != nil {
		return fmt.Errorf("--tls-cipher-suites: %v; known suites: %s", err, strings.Join(cliflag.TLSCipherPossibleValues(), ", "))
	}
	cfg.MinVersion = v
	cfg.CipherSuites = suites
	return nil
}

// VerifyClientCerts has cfg ask clients for a certificate, optionally, and
// verify one given against pool, as kube-apiserver does with its client CA:
// a client without a certificate still connects (and authenticates some
// other way), one with a certificate pool did not sign fails the handshake.
// A nil pool leaves cfg alone.
func VerifyClientCerts(cfg *tls.Config, pool *x509.CertPool) {
	if pool == nil {
		return
	}
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	cfg.ClientCAs = pool
}
