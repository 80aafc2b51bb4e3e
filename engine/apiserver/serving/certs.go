package serving

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"time"
)

const (
	caValidity      = 10 * 365 * 24 * time.Hour
	servingValidity = 365 * 24 * time.Hour
	// renewBefore is how close to expiry a serving certificate is re-issued.
	renewBefore = 30 * 24 * time.Hour
	// clockSkew backdates NotBefore so that a client whose clock is a little
	// behind still accepts a fresh certificate.
	clockSkew = time.Hour
)

// keyPair is a parsed certificate with its private key and their PEM forms.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// newCA creates a self-signed ECDSA P-256 CA.
func newCA(now time.Time) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("setpoint-ca@%d", now.Unix()), Organization: []string{"Setpoint"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, tmpl, key, key)
}

// newServingCert issues a serving certificate for hosts (DNS names and IP
// addresses), signed by ca.
func newServingCert(ca *keyPair, hosts []string, now time.Time) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "setpoint-server", Organization: []string{"Setpoint"}},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(servingValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return sign(tmpl, ca.cert, key, ca.key)
}

func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey crypto.Signer) (*keyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// parseKeyPair parses a PEM certificate (the first of a chain) and its PEM
// private key and checks that they belong together.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: no PEM certificate", ErrBadMaterial)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadMaterial, err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%w: no PEM private key", ErrBadMaterial)
	}
	var key any
	switch kb.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(kb.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadMaterial, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: private key cannot sign", ErrBadMaterial)
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%w: private key does not match the certificate", ErrBadMaterial)
	}
	return &keyPair{cert: cert, key: signer, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// loadPair reads a certificate and key pair from dir; it returns nil and no
// error when either file is missing (a first start, or a start that crashed
// between the two writes).
func loadPair(dir, certName, keyName string) (*keyPair, error) {
	certPEM, err := readIfExists(filepath.Join(dir, certName))
	if err != nil {
		return nil, err
	}
	keyPEM, err := readIfExists(filepath.Join(dir, keyName))
	if err != nil {
		return nil, err
	}
	if certPEM == nil || keyPEM == nil {
		return nil, nil
	}
	kp, err := parseKeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", filepath.Join(dir, certName), err)
	}
	return kp, nil
}

// storePair writes the key first, then the certificate: a certificate on disk
// always has its key.
func storePair(dir, certName, keyName string, kp *keyPair) error {
	if err := writeFileAtomic(filepath.Join(dir, keyName), kp.keyPEM); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, certName), kp.certPEM)
}

// servingCertUsable tells whether cert, issued by ca, still covers hosts and
// is far enough from expiry.
func servingCertUsable(cert *x509.Certificate, ca *x509.Certificate, hosts []string, now time.Time) bool {
	if now.Add(renewBefore).After(cert.NotAfter) || now.Before(cert.NotBefore) {
		return false
	}
	if !bytes.Equal(cert.RawIssuer, ca.RawSubject) || cert.CheckSignatureFrom(ca) != nil {
		return false
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
				return false
			}
		} else if cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}
