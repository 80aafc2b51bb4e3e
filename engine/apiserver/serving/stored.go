package serving

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

// IdentityKey is the store key of the server's identity: the CA, the serving
// certificate and the admin token. It is a private key (store.PrivatePrefix), so
// the API never serves it.
const IdentityKey = store.PrivatePrefix + "identity"

// identityVersion is the format of the stored identity record.
const identityVersion = 1

// maxIdentityAttempts bounds the compare-and-swap retries when replicas
// re-issue the serving certificate at the same time.
const maxIdentityAttempts = 8

// identityRecord is what the store keeps under IdentityKey (PEM texts).
type identityRecord struct {
	Version     int    `json:"version"`
	CACert      string `json:"caCert"`
	CAKey       string `json:"caKey"`
	ServingCert string `json:"servingCert,omitempty"`
	ServingKey  string `json:"servingKey,omitempty"`
	Token       string `json:"token"`
}

// PrepareStored loads the security material from st, the server's store, so
// that every server on one store serves the same CA and serving certificate
// and accepts the same admin token. The first server to start on an empty
// store creates the identity with the store's compare-and-swap Create: from
// the material already in opts.DataDir when there is some (a data directory
// of a server that kept it there), otherwise a fresh CA and token. Servers
// that lose that race read the winner's. The serving certificate is
// re-issued from the same CA, and swapped in the store, only when it no
// longer covers this server's hosts (it then covers the old ones too) or
// nears expiry. opts.DataDir receives a copy of the material, a cache for
// the user; it is never read again once the store holds the identity.
func PrepareStored(ctx context.Context, st store.Store, opts Options) (*Material, error) {
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
	m, err := prepareStored(ctx, st, opts, now())
	if err != nil {
		return nil, fmt.Errorf("prepare security material: %w", err)
	}
	return m, nil
}

func prepareStored(ctx context.Context, st store.Store, opts Options, now time.Time) (*Material, error) {
	rec, rev, err := loadIdentity(ctx, st)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		var hosts []string
		if opts.CertFile == "" {
			hosts = hostsOf(opts.Hosts)
		}
		if rec, err = initialIdentity(opts.DataDir, hosts, now); err != nil {
			return nil, err
		}
		rev, err = st.Create(ctx, IdentityKey, encodeIdentity(rec))
		if errors.Is(err, store.ErrAlreadyExists) {
			// Another server created it first: serve its identity.
			if rec, rev, err = loadIdentity(ctx, st); err == nil && rec == nil {
				err = errors.New("the stored identity vanished while being read")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("store the identity: %w", err)
		}
	}
	m := &Material{DataDir: opts.DataDir}
	if opts.CertFile != "" {
		m.Token = rec.Token
		if err := m.loadUserCert(opts.CertFile, opts.KeyFile); err != nil {
			return nil, err
		}
		return m, cacheIdentity(opts.DataDir, rec, false)
	}
	hosts := hostsOf(opts.Hosts)
	for attempt := 1; ; attempt++ {
		ca, err := parseKeyPair([]byte(rec.CACert), []byte(rec.CAKey))
		if err != nil {
			return nil, fmt.Errorf("the stored CA: %w", err)
		}
		srv, _ := parseKeyPair([]byte(rec.ServingCert), []byte(rec.ServingKey))
		if srv != nil && servingCertUsable(srv.cert, ca.cert, hosts, now) {
			m.Token = rec.Token
			m.CAData, m.ca = []byte(rec.CACert), ca
			m.Certificate, err = tlsPair(srv, ca)
			if err != nil {
				return nil, err
			}
			return m, cacheIdentity(opts.DataDir, rec, true)
		}
		if attempt > maxIdentityAttempts {
			return nil, errors.New("the serving certificate kept changing in the store; giving up")
		}
		// Cover the hosts the stored certificate covers too, so that
		// servers listening on different hosts converge on one certificate.
		want := hosts
		if srv != nil && srv.cert.CheckSignatureFrom(ca.cert) == nil {
			want = unionHosts(hosts, srv.cert)
		}
		if srv, err = newServingCert(ca, want, now); err != nil {
			return nil, err
		}
		next := *rec
		next.ServingCert, next.ServingKey = string(srv.certPEM), string(srv.keyPEM)
		newRev, err := st.Update(ctx, IdentityKey, encodeIdentity(&next), rev)
		switch {
		case err == nil:
			rec, rev = &next, newRev
		case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
			// Another server swapped it first: start over from its record.
			if rec, rev, err = loadIdentity(ctx, st); err != nil {
				return nil, err
			}
			if rec == nil {
				return nil, errors.New("the stored identity was deleted while in use")
			}
		default:
			return nil, fmt.Errorf("store the serving certificate: %w", err)
		}
	}
}

// loadIdentity returns the stored identity and its revision; nil when the
// store has none.
func loadIdentity(ctx context.Context, st store.Store) (*identityRecord, int64, error) {
	kv, err := st.Get(ctx, IdentityKey, store.GetOptions{})
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the stored identity: %w", err)
	}
	var rec identityRecord
	// The decoder's error is not wrapped: it may quote the record, which
	// holds private keys.
	if json.Unmarshal(kv.Value, &rec) != nil {
		return nil, 0, fmt.Errorf("%w: the stored identity is not valid JSON", ErrBadMaterial)
	}
	if rec.Version != identityVersion {
		return nil, 0, fmt.Errorf("%w: the stored identity has format version %d; this server reads %d", ErrBadMaterial, rec.Version, identityVersion)
	}
	if err := checkToken(rec.Token); err != nil {
		return nil, 0, fmt.Errorf("the stored identity: %w", err)
	}
	return &rec, kv.ModRevision, nil
}

func encodeIdentity(rec *identityRecord) []byte {
	b, _ := json.Marshal(rec) // strings only: cannot fail
	return b
}

func checkToken(tok string) error {
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return fmt.Errorf("%w: the admin token is empty or holds whitespace", ErrBadMaterial)
	}
	return nil
}

// initialIdentity returns the identity a first start stores: the CA, serving
// certificate and token found in dir (kept there by earlier versions), each
// generated when missing. A serving certificate is issued for hosts when
// there are some and dir has none usable.
func initialIdentity(dir string, hosts []string, now time.Time) (*identityRecord, error) {
	rec := &identityRecord{Version: identityVersion}
	b, err := readIfExists(filepath.Join(dir, tokenFile))
	if err != nil {
		return nil, err
	}
	if b != nil {
		rec.Token = strings.TrimSpace(string(b))
		if err := checkToken(rec.Token); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, tokenFile), err)
		}
	} else if rec.Token, err = NewToken(); err != nil {
		return nil, err
	}
	pki := filepath.Join(dir, pkiDir)
	ca, err := loadPair(pki, caCertFile, caKeyFile)
	if err != nil {
		return nil, err
	}
	if ca == nil {
		if ca, err = newCA(now); err != nil {
			return nil, err
		}
	} else if srv, err := loadPair(pki, servingCertFile, servingKeyFile); err == nil && srv != nil && servingCertUsable(srv.cert, ca.cert, hosts, now) {
		// Keep the serving certificate too while it is usable.
		rec.ServingCert, rec.ServingKey = string(srv.certPEM), string(srv.keyPEM)
	}
	if rec.ServingCert == "" && len(hosts) > 0 {
		srv, err := newServingCert(ca, hosts, now)
		if err != nil {
			return nil, err
		}
		rec.ServingCert, rec.ServingKey = string(srv.certPEM), string(srv.keyPEM)
	}
	rec.CACert, rec.CAKey = string(ca.certPEM), string(ca.keyPEM)
	return rec, nil
}

// cacheIdentity writes the stored identity into dir for the user, leaving
// the files that already hold it untouched.
func cacheIdentity(dir string, rec *identityRecord, serving bool) error {
	files := []struct{ name, data string }{
		{tokenFile, rec.Token + "\n"},
		{filepath.Join(pkiDir, caKeyFile), rec.CAKey},
		{filepath.Join(pkiDir, caCertFile), rec.CACert},
	}
	if serving {
		// The key first: a certificate on disk always has its key.
		files = append(files,
			struct{ name, data string }{filepath.Join(pkiDir, servingKeyFile), rec.ServingKey},
			struct{ name, data string }{filepath.Join(pkiDir, servingCertFile), rec.ServingCert})
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if cur, err := readIfExists(path); err == nil && string(cur) == f.data {
			continue
		}
		if err := writeFileAtomic(path, []byte(f.data)); err != nil {
			return err
		}
	}
	return nil
}

// unionHosts returns hosts plus the DNS names and IP addresses cert covers.
func unionHosts(hosts []string, cert *x509.Certificate) []string {
	out := slices.Clone(hosts)
	for _, ip := range cert.IPAddresses {
		if !slices.ContainsFunc(out, func(h string) bool { return ip.Equal(net.ParseIP(h)) }) {
			out = append(out, ip.String())
		}
	}
	for _, name := range cert.DNSNames {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// tlsPair returns the serving certificate, followed by its CA, with its key.
func tlsPair(srv, ca *keyPair) (tls.Certificate, error) {
	c, err := tls.X509KeyPair(append(slices.Clone(srv.certPEM), ca.certPEM...), srv.keyPEM)
	if err != nil {
		// X509KeyPair's errors name no key material.
		return tls.Certificate{}, fmt.Errorf("%w: %w", ErrBadMaterial, err)
	}
	return c, nil
}
