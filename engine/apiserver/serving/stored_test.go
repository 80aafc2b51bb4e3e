package serving

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func mustPrepare(t *testing.T, st store.Store, opts Options) *Material {
	t.Helper()
	m, err := PrepareStored(context.Background(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameIdentity(t *testing.T, a, b *Material) {
	t.Helper()
	if a.Token != b.Token {
		t.Error("the admin tokens differ")
	}
	if !bytes.Equal(a.CAData, b.CAData) {
		t.Error("the CAs differ")
	}
	if !bytes.Equal(a.Certificate.Certificate[0], b.Certificate.Certificate[0]) {
		t.Error("the serving certificates differ")
	}
}

// Two servers on one store with their own data directories get one identity;
// each data directory holds a copy, and a restart with an emptied data
// directory still finds it in the store.
func TestPrepareStoredSharesTheIdentity(t *testing.T) {
	st := openStore(t)
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a := mustPrepare(t, st, Options{DataDir: dirA})
	b := mustPrepare(t, st, Options{DataDir: dirB})
	sameIdentity(t, a, b)
	if len(a.Token) < 40 {
		t.Errorf("token of %d characters", len(a.Token))
	}
	for _, name := range []string{"pki/ca.crt", "pki/ca.key", "pki/serving.crt", "pki/serving.key", "admin.token"} {
		ca, cb := readFile(t, filepath.Join(dirA, name)), readFile(t, filepath.Join(dirB, name))
		if !bytes.Equal(ca, cb) {
			t.Errorf("%s differs between the data directories", name)
		}
		if fi, err := os.Stat(filepath.Join(dirB, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v", name, err, fi.Mode())
		}
	}
	if got := strings.TrimSpace(string(readFile(t, filepath.Join(dirB, "admin.token")))); got != a.Token {
		t.Error("admin.token holds another token")
	}

	if err := os.RemoveAll(dirA); err != nil {
		t.Fatal(err)
	}
	again := mustPrepare(t, st, Options{DataDir: dirA})
	sameIdentity(t, a, again)
	kv, err := st.Get(context.Background(), IdentityKey, store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kv.CreateRevision != kv.ModRevision {
		t.Errorf("a start with nothing new rewrote the identity (created at %d, modified at %d)", kv.CreateRevision, kv.ModRevision)
	}
}

// A data directory of a server that kept its material only on disk keeps
// its CA, serving certificate and token on the first start with a store.
func TestPrepareStoredImportsTheDataDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	old, err := Prepare(Options{DataDir: dir, Hosts: []string{"example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	m := mustPrepare(t, st, Options{DataDir: dir, Hosts: []string{"example.test"}})
	sameIdentity(t, old, m)
	other := mustPrepare(t, st, Options{DataDir: t.TempDir(), Hosts: []string{"example.test"}})
	sameIdentity(t, old, other)
}

// Servers starting together on an empty store agree on one identity.
func TestPrepareStoredConcurrentFirstStart(t *testing.T) {
	st := openStore(t)
	const n = 8
	ms := make([]*Material, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ms[i], errs[i] = PrepareStored(context.Background(), st, Options{DataDir: t.TempDir()})
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("server %d: %v", i, errs[i])
		}
	}
	for i := 1; i < n; i++ {
		sameIdentity(t, ms[0], ms[i])
	}
}

// Servers on different hosts converge on one serving certificate covering
// them all, from the same CA.
func TestPrepareStoredCoversEveryServersHosts(t *testing.T) {
	st := openStore(t)
	a := mustPrepare(t, st, Options{DataDir: t.TempDir(), Hosts: []string{"a.example.test"}})
	b := mustPrepare(t, st, Options{DataDir: t.TempDir(), Hosts: []string{"b.example.test", "10.1.2.3"}})
	if !bytes.Equal(a.CAData, b.CAData) || a.Token != b.Token {
		t.Fatal("the CA or token changed with the hosts")
	}
	leaf := b.Certificate.Leaf
	for _, h := range []string{"a.example.test", "b.example.test", "10.1.2.3", "localhost", "127.0.0.1"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("the serving certificate does not cover %s: %v", h, err)
		}
	}
	a2 := mustPrepare(t, st, Options{DataDir: t.TempDir(), Hosts: []string{"a.example.test"}})
	sameIdentity(t, b, a2)
	if err := leaf.CheckSignatureFrom(caOf(t, a)); err != nil {
		t.Errorf("the re-issued certificate is not from the CA: %v", err)
	}
}

// The serving certificate is re-issued in the store when it nears expiry.
func TestPrepareStoredRenewsTheServingCertificate(t *testing.T) {
	st := openStore(t)
	now := time.Now()
	a := mustPrepare(t, st, Options{DataDir: t.TempDir()})
	later := now.Add(servingValidity - renewBefore/2)
	b := mustPrepare(t, st, Options{DataDir: t.TempDir(), Now: func() time.Time { return later }})
	if bytes.Equal(a.Certificate.Certificate[0], b.Certificate.Certificate[0]) {
		t.Fatal("the serving certificate was not renewed near its expiry")
	}
	if !bytes.Equal(a.CAData, b.CAData) || a.Token != b.Token {
		t.Fatal("renewing the serving certificate changed the CA or token")
	}
	c := mustPrepare(t, st, Options{DataDir: t.TempDir(), Now: func() time.Time { return later.Add(time.Hour) }})
	sameIdentity(t, b, c)
}

// With the user's certificate the token still comes from the store.
func TestPrepareStoredUsersCertificate(t *testing.T) {
	st := openStore(t)
	certFile, keyFile := selfSigned(t, t.TempDir())
	a := mustPrepare(t, st, Options{DataDir: t.TempDir(), CertFile: certFile, KeyFile: keyFile})
	b := mustPrepare(t, st, Options{DataDir: t.TempDir()})
	if a.Token != b.Token {
		t.Error("the token differs between a server with the user's certificate and one without")
	}
	if bytes.Equal(a.Certificate.Certificate[0], b.Certificate.Certificate[0]) {
		t.Error("the user's certificate was not served")
	}
}

// A damaged record stops the start with an error that quotes no secret.
func TestPrepareStoredDamagedRecord(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	a := mustPrepare(t, st, Options{DataDir: t.TempDir()})
	kv, err := st.Get(ctx, IdentityKey, store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, damaged := range [][]byte{
		append(bytes.Clone(kv.Value[:len(kv.Value)-1]), '!'),
		bytes.Replace(kv.Value, []byte(`"version":1`), []byte(`"version":99`), 1),
		bytes.Replace(kv.Value, []byte(a.Token), []byte(" "+a.Token), 1),
	} {
		if _, err := st.Update(ctx, IdentityKey, damaged, 0); err != nil {
			t.Fatal(err)
		}
		_, err := PrepareStored(ctx, st, Options{DataDir: t.TempDir()})
		if !errors.Is(err, ErrBadMaterial) {
			t.Errorf("damaged record: %v, want ErrBadMaterial", err)
		} else if strings.Contains(err.Error(), a.Token) || strings.Contains(err.Error(), "PRIVATE") {
			t.Errorf("the error quotes a secret: %v", err)
		}
	}
}

func caOf(t *testing.T, m *Material) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(m.CAData)
	if block == nil {
		t.Fatal("no CA PEM")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}
