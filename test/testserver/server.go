package testserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testroot"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Kubectl is the kubectl the suites run.
const Kubectl = "/usr/bin/kubectl"

const (
	startTimeout = 60 * time.Second
	stopTimeout  = 30 * time.Second
	// CommandTimeout bounds each kubectl or setpoint run.
	CommandTimeout = 2 * time.Minute
)

// Options tunes Start.
type Options struct {
	// Args are extra `setpoint server` flags.
	Args []string
	// Env is added to the server's environment.
	Env []string
	// LogLevel is the server's --log-level; "info" when empty.
	LogLevel string
	// DataDir is used instead of a fresh t.TempDir() (to start a second
	// server on the data of a stopped one, for instance).
	DataDir string
	// OwnPluginCache keeps the server's compile cache in its data
	// directory when SharePluginCache is set (a test that looks into it).
	OwnPluginCache bool
}

// SharePluginCache makes every server a test binary starts (unless its
// Options or Args say otherwise) keep its plugin compile cache in one
// directory, bin/.e2e/wasm-cache, instead of its data directory: a suite's
// servers then compile each module once rather than once per server (a Go
// guest: seconds of a loaded machine's CPU each time). The cache is
// content-addressed and its writes are atomic, so servers running side by
// side share it safely. A suite sets it before it starts a server; the
// benchmarks leave it off, so that a cold start costs what it costs.
var SharePluginCache bool

// sharedPluginCache is the directory SharePluginCache names.
func sharedPluginCache() (string, error) {
	root, err := testroot.Find()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", ".e2e", "wasm-cache"), nil
}

// Server is a running `setpoint server` process.
type Server struct {
	t    testing.TB
	opts Options
	bin  string
	home string // HOME for kubectl and setpoint runs, so caches are per server

	// URL is the server's base URL, https://127.0.0.1:PORT.
	URL string
	// Addr is the host:port it listens on.
	Addr string
	// DataDir is the server's data directory.
	DataDir string
	// Kubeconfig is the admin kubeconfig the server wrote.
	Kubeconfig string
	// Token is the admin bearer token.
	Token string
	// CAPool trusts the server's CA.
	CAPool *x509.CertPool

	logs *syncBuffer // every run's stdout and stderr
	// replicas are the servers of a deployment (ReplicasEnv) this Server
	// stands for; nil for one server.
	replicas []*Server

	mu   sync.Mutex // guards cmd, done, exit
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	exit error         // cmd.Wait's result, valid once done is closed
}

// Start builds (once) and starts a server on a free loopback port with a
// fresh data directory, waits until /readyz answers 200 and registers Stop
// with t.Cleanup. The server's output is attached to t's log if t fails.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if n := replicasFromEnv(t, opts); n > 0 {
		return startDeployment(t, opts, n)
	}
	s := &Server{t: t, opts: opts, bin: bin, home: t.TempDir(), DataDir: opts.DataDir, logs: &syncBuffer{}}
	if s.DataDir == "" {
		s.DataDir = filepath.Join(t.TempDir(), "data")
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop server: %v", err)
		}
		if t.Failed() {
			t.Logf("server output (%s):\n%s", s.DataDir, s.logs.String())
		}
	})
	if err := s.start("127.0.0.1:0"); err != nil {
		t.Fatalf("start server: %v\nserver output:\n%s", err, s.logs.String())
	}
	return s
}

// start runs the binary on addr and waits until it is ready.
func (s *Server) start(addr string) error {
	args := append([]string{"server", "--addr", addr, "--data-dir", s.DataDir, "--log-level", s.opts.LogLevel}, s.opts.Args...)
	if SharePluginCache && !s.opts.OwnPluginCache && !slices.Contains(args, "--plugin-cache-dir") {
		dir, err := sharedPluginCache()
		if err != nil {
			return err
		}
		args = append(args, "--plugin-cache-dir", dir)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), s.opts.Env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = s.logs
	fmt.Fprintf(s.logs, "=== setpoint %s\n", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done, s.exit = cmd, done, nil
	s.mu.Unlock()

	// The server prints its URL on stdout once it listens; the rest of its
	// stdout goes to the log too.
	urls := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.logs, line)
			if u, ok := strings.CutPrefix(line, "Setpoint is serving at "); ok {
				select {
				case urls <- strings.TrimSpace(u):
				default:
				}
			}
		}
		_, _ = io.Copy(s.logs, stdout)
	}()
	go func() {
		<-copied // Wait must not run before the pipe is drained
		err := cmd.Wait()
		s.mu.Lock()
		s.exit = err
		s.mu.Unlock()
		close(done)
	}()

	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	select {
	case u := <-urls:
		s.URL = u
	case <-done:
		return fmt.Errorf("server exited before serving: %v", s.exitErr())
	case <-deadline.C:
		s.kill()
		return fmt.Errorf("server did not print its URL within %v", startTimeout)
	}
	pu, err := url.Parse(s.URL)
	if err != nil {
		s.kill()
		return fmt.Errorf("server URL %q: %w", s.URL, err)
	}
	s.Addr = pu.Host
	if err := s.loadCredentials(); err != nil {
		s.kill()
		return err
	}
	return s.waitReady(done, deadline.C)
}

// loadCredentials reads the kubeconfig the server wrote.
func (s *Server) loadCredentials() error {
	s.Kubeconfig = filepath.Join(s.DataDir, "admin.kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	if cfg.Host != s.URL {
		return fmt.Errorf("kubeconfig server %q, the server printed %q", cfg.Host, s.URL)
	}
	s.Token = cfg.BearerToken
	s.CAPool = x509.NewCertPool()
	if !s.CAPool.AppendCertsFromPEM(cfg.TLSClientConfig.CAData) {
		return errors.New("kubeconfig holds no CA certificate")
	}
	return nil
}

func (s *Server) waitReady(done <-chan struct{}, deadline <-chan time.Time) error {
	c := s.HTTPClient()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		resp, err := c.Get(s.URL + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		select {
		case <-tick.C:
		case <-done:
			return fmt.Errorf("server exited before it was ready: %v", s.exitErr())
		case <-deadline:
			s.kill()
			return fmt.Errorf("server not ready within %v; last /readyz: %s", startTimeout, last)
		}
	}
}

func (s *Server) exitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exit
}

func (s *Server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Kill kills the server with SIGKILL, as a machine that dies would, and
// waits for it to exit. It is not started again; Stop then returns nil.
func (s *Server) Kill() {
	s.single("Kill")
	s.kill()
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
}

// Signal sends sig to the server process.
func (s *Server) Signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("testserver: not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Wait waits up to timeout for the process to exit and returns its exit
// error (nil for exit code 0).
func (s *Server) Wait(timeout time.Duration) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return s.exitErr()
	case <-time.After(timeout):
		return fmt.Errorf("testserver: still running after %v", timeout)
	}
}

// Stop sends SIGTERM and waits for the process to exit; it kills it if it
// has not exited within 30 s. It returns nil when the server exited with
// code 0. Stop is idempotent.
func (s *Server) Stop() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return s.exitErr()
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-done:
		// An exit with an error is reported as that error, not as a hang.
		return s.exitErr()
	case <-t.C:
		s.kill()
		return fmt.Errorf("no exit within %v of SIGTERM; killed", stopTimeout)
	}
}

// Restart stops the server and starts it again on the same data directory
// and port. It fails the test if either step fails.
func (s *Server) Restart() {
	s.t.Helper()
	s.single("Restart")
	if err := s.Stop(); err != nil {
		s.t.Fatalf("restart: stop: %v", err)
	}
	if err := s.start(s.Addr); err != nil {
		s.t.Fatalf("restart: %v\nserver output:\n%s", err, s.logs.String())
	}
}

// Crash kills the server with SIGKILL, giving it no chance to flush or
// close anything, and starts it again on the same data directory and port.
// Pid is the process id of the running server, 0 when none runs.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// It fails the test if the new process does not become ready.
func (s *Server) Crash() {
	s.t.Helper()
	s.single("Crash")
	s.kill()
	if err := s.start(s.Addr); err != nil {
		s.t.Fatalf("start after a crash: %v\nserver output:\n%s", err, s.logs.String())
	}
}

// Logs returns everything the server printed so far, across restarts;
// for a deployment, what each replica printed, one after another.
func (s *Server) Logs() string {
	if s.replicas != nil {
		var b strings.Builder
		for _, r := range s.replicas {
			b.WriteString(r.Logs())
		}
		return b.String()
	}
	return s.logs.String()
}

// Servers returns the servers s stands for: each replica of a deployment,
// or s itself.
func (s *Server) Servers() []*Server {
	if s.replicas != nil {
		return s.replicas
	}
	return []*Server{s}
}

// single fails the test when s stands for a deployment, which op does not
// apply to.
func (s *Server) single(op string) {
	s.t.Helper()
	if s.replicas != nil {
		s.t.Fatalf("testserver: %s is for one server; this test runs against %d replicas (%s)", op, len(s.replicas), ReplicasEnv)
	}
}

// HTTPClient returns a client that trusts the server's CA and sends no
// token. A deployment's client sends each request to the next replica.
func (s *Server) HTTPClient() *http.Client {
	if s.replicas != nil {
		return &http.Client{Timeout: 30 * time.Second, Transport: s.spreadTransport()}
	}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: s.CAPool, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
		},
	}
}

// Do sends an HTTP request to path with token as the bearer token (none when
// empty) and returns the status code and body. A body is sent as JSON.
func (s *Server) Do(method, path, token string, body io.Reader) (int, []byte, error) {
	return s.DoWith(method, path, token, body, DoOptions{})
}

// DoOptions tunes DoWith; its zero value makes DoWith what Do is.
type DoOptions struct {
	// Header is set on the request over Do's own headers: a Content-Type
	// here replaces application/json, an Impersonate-User acts as a user.
	Header http.Header
	// Client sends the request; nil is a fresh HTTPClient, whose idle
	// connections are closed after. A test that sends many requests passes
	// one client to keep its connections.
	Client *http.Client
	// Timeout bounds the request and the reading of its answer; 0 is 30
	// seconds.
	Timeout time.Duration
}

// DoWith is Do with the headers, client and time limit of opts.
func (s *Server) DoWith(method, path, token string, body io.Reader, opts DoOptions) (int, []byte, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, body)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range opts.Header {
		req.Header[http.CanonicalHeaderKey(k)] = v
	}
	c := opts.Client
	if c == nil {
		c = s.HTTPClient()
		defer c.CloseIdleConnections()
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// RESTConfig returns a client-go configuration for the admin user.
func (s *Server) RESTConfig() *rest.Config {
	s.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		s.t.Fatal(err)
	}
	if s.replicas != nil {
		// Each request goes to the next replica; the transport holds
		// the trust in the CA.
		cfg.TLSClientConfig = rest.TLSClientConfig{}
		cfg.Transport = s.spreadTransport()
	}
	return cfg
}

// Command returns a command for name (a path, or kubectl or setpoint) with
// KUBECONFIG set to the admin kubeconfig and a per-server HOME, for tests
// that need to stream its output. The caller runs and waits for it.
func (s *Server) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	switch name {
	case "kubectl":
		name = Kubectl
	case "setpoint":
		name = s.bin
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig, "HOME="+s.home, "NO_COLOR=1")
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func (s *Server) run(stdin, name string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	cmd := s.Command(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// Kubectl runs /usr/bin/kubectl with the admin kubeconfig.
func (s *Server) Kubectl(args ...string) (stdout, stderr string, err error) {
	return s.run("", "kubectl", args...)
}

// KubectlInput runs kubectl with stdin as its standard input.
func (s *Server) KubectlInput(stdin string, args ...string) (stdout, stderr string, err error) {
	return s.run(stdin, "kubectl", args...)
}

// MustKubectl runs kubectl with stdin (none when empty) and returns its
// standard output, ending the test that started the server, from its own
// goroutine, when kubectl fails.
func (s *Server) MustKubectl(stdin string, args ...string) string {
	s.t.Helper()
	out, errOut, err := s.run(stdin, "kubectl", args...)
	if err != nil {
		s.t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// Setpoint runs the setpoint CLI with the admin kubeconfig.
func (s *Server) Setpoint(args ...string) (stdout, stderr string, err error) {
	return s.run("", "setpoint", args...)
}

// SetpointInput runs the setpoint CLI with stdin as its standard input.
func (s *Server) SetpointInput(stdin string, args ...string) (stdout, stderr string, err error) {
	return s.run(stdin, "setpoint", args...)
}

// FreeAddr returns a loopback address that was free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// syncBuffer collects the server's output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
