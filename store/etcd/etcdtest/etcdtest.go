// Package etcdtest starts real etcd servers for tests: one member
// (Start) or a cluster of several (StartCluster) on loopback, on free
// ports, in temporary directories, killed when the test ends. It runs the etcd binary named by $SETPOINT_ETCD, or etcd on the
// PATH (Debian's etcd-server; .ci/install-deps installs it); a missing
// binary fails the test rather than skipping it.
package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Options tunes Start. The zero value starts etcd with its own defaults.
type Options struct {
	// MaxRequestBytes is etcd's --max-request-bytes; 0 keeps etcd's
	// default (1.5 MiB).
	MaxRequestBytes int
	// ProgressNotifyInterval is etcd's
	// --experimental-watch-progress-notify-interval; 0 keeps etcd's
	// default (10 minutes).
	ProgressNotifyInterval time.Duration
	// StartTimeout bounds the wait for etcd to answer. Default: 30 seconds.
	StartTimeout time.Duration
	// TLS serves clients over HTTPS with a certificate from a CA of the
	// test's own, and requires client certificates from that CA
	// (Server.TLS names the files).
	TLS bool
}

// Server is a running etcd member.
type Server struct {
	// Endpoint is its client URL (http://127.0.0.1:PORT).
	Endpoint string
	// Dir is its data directory.
	Dir string
	// TLS names the CA and client certificate files when Options.TLS is
	// set; nil otherwise.
	TLS *TLSFiles

	t    testing.TB
	args []string
	bin  string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Binary returns the etcd binary the tests run, or fails t saying how to
// install it.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("SETPOINT_ETCD"); b != "" {
		return b
	}
	b, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcd is not installed (no etcd on the PATH and $SETPOINT_ETCD unset): install Debian's etcd-server, as .ci/install-deps does (make deps)")
	}
	return b
}

// Start starts an etcd member and returns once it answers; the test's
// cleanup kills it.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	bin := Binary(t)
	dir := t.TempDir()
	var tlsFiles *TLSFiles
	scheme := "http"
	if opts.TLS {
		tlsFiles, scheme = makeTLS(t, dir), "https"
	}
	var lastErr error
	// A free port found by listening may be taken before etcd binds it:
	// try again with other ports.
	for range 3 {
		client, peer := freePort(t), freePort(t)
		s := &Server{
			Endpoint: scheme + "://127.0.0.1:" + client,
			TLS:      tlsFiles,
			Dir:      filepath.Join(dir, "data"),
			t:        t,
			bin:      bin,
			log:      filepath.Join(dir, "etcd.log"),
		}
		peerURL := "http://127.0.0.1:" + peer
		s.args = []string{
			"--name", "default",
			"--data-dir", s.Dir,
			"--listen-client-urls", s.Endpoint,
			"--advertise-client-urls", s.Endpoint,
			"--listen-peer-urls", peerURL,
			"--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "default=" + peerURL,
			"--log-level", "warn",
			"--logger", "zap",
		}
		if tlsFiles != nil {
			s.args = append(s.args, "--cert-file", tlsFiles.serverCert, "--key-file", tlsFiles.serverKey,
				"--trusted-ca-file", tlsFiles.CAFile, "--client-cert-auth")
		}
		if opts.MaxRequestBytes > 0 {
			s.args = append(s.args, "--max-request-bytes", strconv.Itoa(opts.MaxRequestBytes))
		}
		if opts.ProgressNotifyInterval > 0 {
			s.args = append(s.args, "--experimental-watch-progress-notify-interval", opts.ProgressNotifyInterval.String())
		}
		if lastErr = s.start(opts.StartTimeout); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
		_ = os.RemoveAll(s.Dir)
	}
	t.Fatalf("start etcd: %v", lastErr)
	return nil
}

// Restart starts the member again on the same ports and data, after Stop.
func (s *Server) Restart(timeout time.Duration) error {
	return s.start(timeout)
}

func (s *Server) start(timeout time.Duration) error {
	if err := s.launch(); err != nil {
		return err
	}
	return s.waitHealthy(timeout)
}

// launch runs the etcd process.
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so that no signal meant for the test reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return nil
}

// waitHealthy returns once the member answers healthy (it has a leader),
// or stops it and says why not.
func (s *Server) waitHealthy(timeout time.Duration) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	if s.TLS != nil {
		cfg, err := s.TLS.clientConfig()
		if err != nil {
			return err
		}
		hc.Transport = &http.Transport{TLSClientConfig: cfg}
	}
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("etcd exited at start: %s", s.logTail())
		default:
		}
		if resp, err := hc.Get(s.Endpoint + "/health"); err == nil {
			body := new(bytes.Buffer)
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body.Bytes(), []byte(`"true"`)) {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Stop()
	return fmt.Errorf("etcd did not answer on %s within %v: %s", s.Endpoint, timeout, s.logTail())
}

// Stop kills the member and waits for it to exit. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.t.Errorf("etcd (pid %d) did not exit 10 s after SIGKILL", cmd.Process.Pid)
	}
}

// logTail is the end of etcd's log, for error messages.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// Cluster is a running etcd cluster of several members.
type Cluster struct {
	// Members are its members, in the order of Endpoints.
	Members []*Server
	// Endpoints are the members' client URLs.
	Endpoints []string
}

// StartCluster starts an etcd cluster of n members (plain HTTP; opts.TLS
// is not supported) and returns once every member answers healthy; the
// test's cleanup kills them.
func StartCluster(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if opts.TLS {
		t.Fatal("etcdtest.StartCluster: TLS is not supported")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	bin := Binary(t)
	dir := t.TempDir()
	c := &Cluster{}
	var initial []string
	peers := make([]string, n)
	for i := range n {
		client := freePort(t)
		peers[i] = "http://127.0.0.1:" + freePort(t)
		name := fmt.Sprintf("m%d", i)
		initial = append(initial, name+"="+peers[i])
		c.Members = append(c.Members, &Server{
			Endpoint: "http://127.0.0.1:" + client,
			Dir:      filepath.Join(dir, name),
			t:        t,
			bin:      bin,
			log:      filepath.Join(dir, name+".log"),
		})
		c.Endpoints = append(c.Endpoints, c.Members[i].Endpoint)
	}
	for i, s := range c.Members {
		s.args = []string{
			"--name", fmt.Sprintf("m%d", i),
			"--data-dir", s.Dir,
			"--listen-client-urls", s.Endpoint,
			"--advertise-client-urls", s.Endpoint,
			"--listen-peer-urls", peers[i],
			"--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", "etcdtest",
			"--log-level", "warn",
			"--logger", "zap",
		}
		if opts.MaxRequestBytes > 0 {
			s.args = append(s.args, "--max-request-bytes", strconv.Itoa(opts.MaxRequestBytes))
		}
		if opts.ProgressNotifyInterval > 0 {
			s.args = append(s.args, "--experimental-watch-progress-notify-interval", opts.ProgressNotifyInterval.String())
		}
		t.Cleanup(s.Stop)
		// The members wait for one another to elect a leader: start all,
		// then wait.
		if err := s.launch(); err != nil {
			t.Fatalf("start etcd member %d: %v", i, err)
		}
	}
	for i, s := range c.Members {
		if err := s.waitHealthy(opts.StartTimeout); err != nil {
			t.Fatalf("etcd member %d: %v", i, err)
		}
	}
	return c
}

// Leader returns the index in Members of the member that leads the
// cluster, as the running members report it.
func (c *Cluster) Leader(t testing.TB) int {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ids := make([]uint64, len(c.Members))
	var leader uint64
	for i, ep := range c.Endpoints {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			continue // a stopped member
		}
		ids[i], leader = st.Header.MemberId, st.Leader
	}
	for i, id := range ids {
		if id != 0 && id == leader {
			return i
		}
	}
	t.Fatalf("no member of %v leads the cluster", c.Endpoints)
	return -1
}
