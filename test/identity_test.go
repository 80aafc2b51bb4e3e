package test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

func readKubeconfig(t *testing.T, path string) (caData []byte, token string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.TLSClientConfig.CAData, cfg.BearerToken
}

// servedLeaf returns the serving certificate at url, trusting caData.
func servedLeaf(t *testing.T, url string, caData []byte) []byte {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caData)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS to %s trusting the expected CA: %v", url, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw
}

// TestReplicasOnEtcdShareOneIdentity: two servers on one etcd, each with its
// own data directory, serve one CA and one serving certificate and accept one
// admin token, so one kubeconfig works against both (kubectl and client-go);
// another installation under another prefix has an identity of its own.
func TestReplicasOnEtcdShareOneIdentity(t *testing.T) {
	e := etcdtest.Start(t, etcdtest.Options{})
	args := []string{"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/ident"}
	a := testserver.Start(t, testserver.Options{Args: args})
	b := testserver.Start(t, testserver.Options{Args: args})
	caA, _ := readKubeconfig(t, a.Kubeconfig)
	caB, _ := readKubeconfig(t, b.Kubeconfig)
	if a.DataDir == b.DataDir {
		t.Fatal("the servers share a data directory")
	}
	if !bytes.Equal(caA, caB) || a.Token != b.Token {
		t.Fatal("the servers' kubeconfigs have different CAs or tokens")
	}
	if !bytes.Equal(servedLeaf(t, a.URL, caA), servedLeaf(t, b.URL, caA)) {
		t.Error("the servers serve different certificates")
	}
	if got, err := os.ReadFile(filepath.Join(b.DataDir, "admin.token")); err != nil || strings.TrimSpace(string(got)) != a.Token {
		t.Errorf("the second server's admin.token does not hold the shared token: %v", err)
	}

	// kubectl with the first server's kubeconfig, against the second.
	home := t.TempDir()
	kubectl := func(url string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), testserver.CommandTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, testserver.Kubectl, append([]string{"--kubeconfig", a.Kubeconfig, "--server", url}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := kubectl(b.URL, "create", "namespace", "made-on-b"); err != nil {
		t.Fatalf("kubectl create through the second server with the first's kubeconfig: %v\n%s", err, out)
	}
	if out, err := kubectl(b.URL, "get", "namespace", "made-on-b", "-o", "name"); err != nil || strings.TrimSpace(out) != "namespace/made-on-b" {
		t.Fatalf("kubectl get through the second server with the first's kubeconfig: %v\n%s", err, out)
	}

	// client-go: one configuration, both servers.
	cfg, err := clientcmd.BuildConfigFromFlags("", a.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, url := range []string{a.URL, b.URL} {
		c := *cfg
		c.Host = url
		cs, err := kubernetes.NewForConfig(&c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("client-go through %s with the first server's kubeconfig: %v", url, err)
		}
	}

	// Another installation on the same etcd has an identity of its own.
	other := testserver.Start(t, testserver.Options{Args: []string{"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/ident-other"}})
	if other.Token == a.Token {
		t.Error("an installation under another prefix shares the token")
	}
	for _, s := range []*testserver.Server{a, b} {
		if strings.Contains(s.Logs(), a.Token) {
			t.Error("a server log holds the admin token")
		}
	}
}

// TestIdentityConcurrentFirstStartOnEtcd: servers starting at once on an
// empty etcd, each through its own etcd client and data directory, converge
// on one identity (the store's compare-and-swap Create picks one).
func TestIdentityConcurrentFirstStartOnEtcd(t *testing.T) {
	e := etcdtest.Start(t, etcdtest.Options{})
	const servers, rounds = 4, 5
	for round := range rounds {
		prefix := fmt.Sprintf("/race%d", round)
		stores := make([]*etcd.DB, servers)
		for i := range stores {
			db, err := etcd.Open(etcd.Options{Endpoints: []string{e.Endpoint}, Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			stores[i] = db
		}
		ms := make([]*serving.Material, servers)
		errs := make([]error, servers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ms[i], errs[i] = serving.PrepareStored(context.Background(), stores[i], serving.Options{DataDir: t.TempDir()})
			}()
		}
		close(start)
		wg.Wait()
		for i := range servers {
			if errs[i] != nil {
				t.Fatalf("round %d, server %d: %v", round, i, errs[i])
			}
			if ms[i].Token != ms[0].Token || !bytes.Equal(ms[i].CAData, ms[0].CAData) ||
				!bytes.Equal(ms[i].Certificate.Certificate[0], ms[0].Certificate.Certificate[0]) {
				t.Fatalf("round %d: server %d has another identity than server 0", round, i)
			}
		}
	}
}

// TestBadgerDataDirFromBeforeKeepsIdentity: a data directory whose CA and
// token are only files (as earlier versions kept them) keeps them; after
// the first start they are in the store, so a restart without the files
// still serves them.
func TestBadgerDataDirFromBeforeKeepsIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	const token = "token-of-an-earlier-version-0123456789abcdefghijkl"
	caPEM, caKeyPEM := newTestCA(t)
	for name, data := range map[string][]byte{
		"admin.token": []byte(token + "\n"),
		"pki/ca.crt":  caPEM,
		"pki/ca.key":  caKeyPEM,
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *testserver.Server, when string) {
		t.Helper()
		if s.Token != token {
			t.Errorf("%s: the kubeconfig has another token", when)
		}
		caData, _ := readKubeconfig(t, s.Kubeconfig)
		if !bytes.Equal(caData, caPEM) {
			t.Errorf("%s: the kubeconfig has another CA", when)
		}
		servedLeaf(t, s.URL, caPEM) // fails unless the CA signed it
		if out, stderr, err := s.Kubectl("get", "namespaces", "-o", "name"); err != nil {
			t.Errorf("%s: kubectl: %v\n%s%s", when, err, out, stderr)
		}
	}
	s := testserver.Start(t, testserver.Options{DataDir: dir})
	check(s, "first start")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"admin.token", "pki"} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	s.Restart()
	check(s, "restart without the files")
}

func newTestCA(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "setpoint-ca@earlier"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}
