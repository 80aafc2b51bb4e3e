package peer

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// peerVersion is the kube-apiserver release the peer is built from
// (build-peer.sh).
const peerVersion = "v1.34.4"

// peerBinaries returns the kube-apiserver and etcd to run: KUBE_APISERVER_BIN
// and ETCD_BIN, or what build-peer.sh left in its cache folder.
func peerBinaries(b *testing.B) (kas, etcd string) {
	b.Helper()
	cache := os.Getenv("PEER_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			b.Fatalf("peer binaries: %v", err)
		}
		cache = filepath.Join(dir, "setpoint", "peer", peerVersion)
	}
	kas, etcd = os.Getenv("KUBE_APISERVER_BIN"), os.Getenv("ETCD_BIN")
	if kas == "" {
		kas = filepath.Join(cache, "kube-apiserver")
	}
	if etcd == "" {
		etcd = filepath.Join(cache, "etcd")
	}
	for _, p := range []string{kas, etcd} {
		if _, err := os.Stat(p); err != nil {
			b.Fatalf("peer binary: %v (test/bench/peer/build-peer.sh builds kube-apiserver and etcd; `make bench-peer` runs it)", err)
		}
	}
	return kas, etcd
}

// child is a process the benchmark started: its output goes to a file in
// the benchmark's temp dir, and it dies with the benchmark's process.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startChild(b *testing.B, dir, name, bin string, args ...string) *child {
	b.Helper()
	c := &child{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(c.log)
	if err != nil {
		b.Fatal(err)
	}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Stdout, c.cmd.Stderr = f, f
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		f.Close()
		b.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = c.cmd.Wait()
		f.Close()
		close(c.done)
	}()
	b.Cleanup(func() {
		c.stop()
		if b.Failed() {
			b.Logf("%s output (last 4 KiB):\n%s", name, c.tail(4096))
		}
	})
	return c
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, and SIGKILL after 15 s; it is idempotent.
func (c *child) stop() {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func (c *child) tail(n int64) string {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// startPeer starts a one-member etcd and kube-apiserver on it, both on
// loopback ports, as README-style single-node set-ups do: bearer-token
// authentication from a file, every request allowed, service-account keys
// made here. It returns once kube-apiserver's /readyz answers 200.
func startPeer(b *testing.B) *server {
	b.Helper()
	kasBin, etcdBin := peerBinaries(b)
	dir := b.TempDir()
	token := randomToken(b)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	writeServiceAccountKeys(b, dir)
	clientAddr, peerAddr, kasAddr := freeAddr(b), freeAddr(b), freeAddr(b)
	_, kasPort, _ := strings.Cut(kasAddr, ":")

	start := time.Now()
	etcd := startChild(b, dir, "etcd", etcdBin,
		"--name", "peer",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://"+clientAddr,
		"--advertise-client-urls", "http://"+clientAddr,
		"--listen-peer-urls", "http://"+peerAddr,
		"--initial-advertise-peer-urls", "http://"+peerAddr,
		"--initial-cluster", "peer=http://"+peerAddr,
		"--initial-cluster-state", "new",
		"--quota-backend-bytes", fmt.Sprint(int64(4)<<30),
		"--log-level", "warn",
	)
	waitHTTP(b, etcd, "http://"+clientAddr+"/health", "", nil)
	kas := startChild(b, dir, "kube-apiserver", kasBin,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+kasPort,
		"--etcd-servers=http://"+clientAddr,
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/12",
		"--endpoint-reconciler-type=none",
	)
	// The serving certificate is self-signed and written at start; readiness
	// is polled without checking it, the benchmark's clients check it.
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback readiness probe only
	waitHTTP(b, kas, "https://"+kasAddr+"/readyz", token, insecure, etcd)
	ready := time.Since(start)

	cfg := &rest.Config{
		Host:            "https://" + kasAddr,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(dir, "certs", "apiserver.crt")},
	}
	return &server{
		name:    "kube-apiserver+etcd",
		cfg:     cfg,
		ready:   ready,
		pids:    func() []int { return []int{kas.pid(), etcd.pid()} },
		dataDir: filepath.Join(dir, "etcd"),
		stop: func() {
			kas.stop()
			etcd.stop()
		},
	}
}

// waitHTTP polls url every 50 ms until it answers 200, for at most three
// minutes; it fails b when c (or any of also) exits first.
func waitHTTP(b *testing.B, c *child, url, token string, tlsConfig *tls.Config, also ...*child) {
	b.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	last := ""
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		for _, x := range append([]*child{c}, also...) {
			if x.exited() {
				b.Fatalf("%s exited before %s was ready: %v\n%s", x.name, url, x.cmd.ProcessState, x.tail(4096))
			}
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%s not ready within 3 minutes: %s\n%s", url, last, c.tail(4096))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freeAddr(b *testing.B) string {
	b.Helper()
	a, err := testserver.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func randomToken(b *testing.B) string {
	var p [24]byte
	if _, err := rand.Read(p[:]); err != nil {
		b.Fatal(err)
	}
	return hex.EncodeToString(p[:])
}

// writeServiceAccountKeys writes the RSA key pair kube-apiserver signs and
// checks service-account tokens with, as sa.key and sa.pub in dir.
func writeServiceAccountKeys(b *testing.B, dir string) {
	b.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		b.Fatal(err)
	}
	files := map[string]*pem.Block{
		"sa.key": {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)},
		"sa.pub": {Type: "PUBLIC KEY", Bytes: pub},
	}
	for name, block := range files {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			b.Fatal(err)
		}
	}
}
