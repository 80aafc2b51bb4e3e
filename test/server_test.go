package test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/buildinfo"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestServer checks what one server answers: authentication, probes,
// kubectl over HTTPS with the generated kubeconfig, and metrics.
func TestServer(t *testing.T) {
	examples := t.TempDir()
	if err := os.MkdirAll(filepath.Join(examples, "widget"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(examples, "widget", "crd.yaml"), []byte(widgetCRD), 0o644); err != nil {
		t.Fatal(err)
	}
	s := testserver.Start(t, testserver.Options{Args: []string{"--examples", "--examples-dir", examples}})

	t.Run("authentication", func(t *testing.T) {
		tests := []struct {
			name  string
			path  string
			token string
			want  int
		}{
			{name: "no token", path: "/api", want: 401},
			{name: "wrong token", path: "/api", token: "not-the-token", want: 401},
			{name: "token with a suffix", path: "/api", token: s.Token + "x", want: 401},
			{name: "right token", path: "/api", token: s.Token, want: 200},
			{name: "metrics without a token", path: "/metrics", want: 401},
			{name: "healthz without a token", path: "/healthz", want: 200},
			{name: "readyz without a token", path: "/readyz", want: 200},
			{name: "default roles written", path: "/readyz/poststarthook/rbac/bootstrap-roles", want: 200},
			{name: "livez without a token", path: "/livez", want: 200},
			{name: "version without a token", path: "/version", want: 200},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				code, body, err := s.Do("GET", tt.path, tt.token, nil)
				if err != nil {
					t.Fatal(err)
				}
				if code != tt.want {
					t.Fatalf("GET %s: %d %s, want %d", tt.path, code, body, tt.want)
				}
				if code == 401 {
					var st metav1.Status
					if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || st.Code != 401 || st.Reason != metav1.StatusReasonUnauthorized {
						t.Errorf("401 body %s (%v), want a meta/v1 Status", body, err)
					}
				}
			})
		}
	})

	t.Run("kubectl version and get ns over HTTPS", func(t *testing.T) {
		if !strings.HasPrefix(s.URL, "https://") {
			t.Fatalf("URL %s is not HTTPS", s.URL)
		}
		out, stderr, err := s.Kubectl("version", "-o", "json")
		if err != nil {
			t.Fatalf("kubectl version: %v\n%s", err, stderr)
		}
		var v struct {
			ServerVersion *struct{ GitVersion, GitCommit, GitTreeState, BuildDate string } `json:"serverVersion"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.ServerVersion == nil || v.ServerVersion.GitVersion == "" {
			t.Fatalf("kubectl version printed no server version (%v):\n%s\n%s", err, out, stderr)
		}
		// A binary built in a git checkout says which commit it is.
		bin, err := testserver.Binary()
		if err != nil {
			t.Fatal(err)
		}
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		stamp := map[string]string{}
		for _, s := range info.Settings {
			stamp[s.Key] = s.Value
		}
		if sv := v.ServerVersion; sv.GitCommit != stamp["vcs.revision"] || sv.BuildDate != stamp["vcs.time"] ||
			(stamp["vcs.revision"] != "" && sv.GitTreeState != map[string]string{"true": "dirty", "false": "clean"}[stamp["vcs.modified"]]) {
			t.Errorf("server version %+v, want the binary's stamp %v", *sv, stamp)
		}
		out, stderr, err = s.Kubectl("get", "ns", "-o", "name")
		if err != nil {
			t.Fatalf("kubectl get ns: %v\n%s", err, stderr)
		}
		if !strings.Contains(out, "namespace/default") {
			t.Fatalf("kubectl get ns lacks default:\n%s", out)
		}
	})

	t.Run("--examples registers the example kinds", func(t *testing.T) {
		// The kinds are applied once the server is up, so allow a moment.
		start := time.Now()
		var out string
		testsupport.Poll(t, 30*time.Second, "widgets served", func() (bool, string) {
			o, stderr, err := s.Kubectl("get", "widgets", "-o", "name")
			out = o
			return err == nil, fmt.Sprintf("%v\n%s", err, stderr)
		})
		if out != "" {
			t.Errorf("fresh server has widgets: %s", out)
		}
		if !strings.Contains(s.Logs(), "example kind applied") {
			t.Errorf("server did not log the example kind")
		}
		// The banner comes once the examples are loaded, not before.
		testsupport.Poll(t, 30*time.Second-time.Since(start), "the examples banner", func() (bool, string) {
			logs := s.Logs()
			return strings.Contains(logs, "examples ready: kubectl get widgets"), "\n" + logs
		})
	})

	t.Run("kubectl with a wrong token is refused", func(t *testing.T) {
		_, stderr, err := s.Kubectl("get", "ns", "--token", "wrong")
		if err == nil || !strings.Contains(stderr, "Unauthorized") {
			t.Fatalf("kubectl with a wrong token: %v\n%s", err, stderr)
		}
	})

	t.Run("the web UI's static files need no token", func(t *testing.T) {
		code, body, err := s.Do("GET", "/ui/", "", nil)
		if err != nil || code != 200 || !strings.Contains(string(body), "<") {
			t.Fatalf("GET /ui/ without a token: %d %v", code, err)
		}
	})

	t.Run("metrics count requests", func(t *testing.T) {
		for range 3 {
			if code, body, err := s.Do("GET", "/api/v1/namespaces", s.Token, nil); err != nil || code != 200 {
				t.Fatalf("list namespaces: %d %s %v", code, body, err)
			}
		}
		if code, _, _ := s.Do("GET", "/api/v1/namespaces", "", nil); code != 401 {
			t.Fatalf("anonymous list: %d", code)
		}
		code, body, err := s.Do("GET", "/metrics", s.Token, nil)
		if err != nil || code != 200 {
			t.Fatalf("/metrics: %d %v", code, err)
		}
		text := string(body)
		for _, want := range []string{
			`setpoint_apiserver_requests_total{code="200",resource="namespaces",subresource="",verb="list"}`,
			`setpoint_apiserver_requests_total{code="401",resource="namespaces",subresource="",verb="list"}`,
			`setpoint_apiserver_request_duration_seconds_bucket{code="200",resource="namespaces",subresource="",verb="list",le="+Inf"}`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if n := metricValue(text, `setpoint_apiserver_requests_total{code="200",resource="namespaces",subresource="",verb="list"}`); n < 3 {
			t.Errorf("list namespaces counted %v times, want at least 3", n)
		}
	})
}

// TestServerLogNeverHoldsTheToken checks the debug log after authenticated,
// rejected and kubectl requests.
func TestServerLogNeverHoldsTheToken(t *testing.T) {
	s := testserver.Start(t, testserver.Options{LogLevel: "debug"})
	for _, tok := range []string{s.Token, s.Token + "x", ""} {
		if _, _, err := s.Do("GET", "/api/v1/namespaces?watch=false", tok, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, err := s.Kubectl("get", "ns", "-v=1"); err != nil {
		t.Fatalf("kubectl: %v\n%s", err, stderr)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.Logs(), s.Token) {
		t.Fatal("the server log holds the admin token")
	}
	if !strings.Contains(s.Logs(), "user=setpoint-admin") {
		t.Error("the request log does not name the user")
	}
}

// metricValue returns the value of the sample named exactly series, or -1.
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if err := json.Unmarshal([]byte(v), &f); err == nil {
				return f
			}
		}
	}
	return -1
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// builtinKindsServed checks that s serves the built-in kinds the server
// makes itself (Leases, Plugins): from its first request on, not a moment
// after it starts answering.
func builtinKindsServed(t *testing.T, s *testserver.Server) {
	t.Helper()
	for _, path := range []string{leasesPath, pluginsPath} {
		if code, body, err := s.Do("GET", path, s.Token, nil); err != nil || code != http.StatusOK {
			t.Errorf("GET %s at once after the start: %d %v %s", path, code, err, body)
		}
	}
}

// TestServerRestartKeepsCATokenAndData also checks that the built-in kinds
// are served as soon as the server answers, on a fresh store and after a
// restart.
func TestServerRestartKeepsCATokenAndData(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	builtinKindsServed(t, s)
	files := []string{"pki/ca.crt", "pki/ca.key", "pki/serving.crt", "pki/serving.key", "admin.token"}
	before := map[string][]byte{}
	for _, f := range files {
		before[f] = readFile(t, filepath.Join(s.DataDir, f))
	}
	for _, f := range append(files, "admin.kubeconfig") {
		st, err := os.Stat(filepath.Join(s.DataDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	if _, stderr, err := s.KubectlInput("apiVersion: v1\nkind: Namespace\nmetadata: {name: kept-across-restarts}\n", "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply namespace: %v\n%s", err, stderr)
	}
	token, url := s.Token, s.URL

	s.Restart()
	builtinKindsServed(t, s)

	if s.Token != token || s.URL != url {
		t.Errorf("token or URL changed: %q→%q", url, s.URL)
	}
	for _, f := range files {
		if !bytes.Equal(before[f], readFile(t, filepath.Join(s.DataDir, f))) {
			t.Errorf("%s changed across a restart", f)
		}
	}
	out, stderr, err := s.Kubectl("get", "namespace", "kept-across-restarts", "-o", "name")
	if err != nil || strings.TrimSpace(out) != "namespace/kept-across-restarts" {
		t.Fatalf("namespace lost across a restart: %v\n%s%s", err, out, stderr)
	}
}

func TestServerSIGTERMShutsDownCleanly(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	// An open watch must not hold the shutdown up.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL+"/api/v1/namespaces?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := s.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}

	start := time.Now()
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(20 * time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want exit code 0", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("shutdown took %v with a watch open", d)
	}
	for _, want := range []string{`msg="shutting down"`, `msg=stopped`} {
		if !strings.Contains(s.Logs(), want) {
			t.Errorf("server log lacks %s", want)
		}
	}
	if _, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		t.Error("port still accepting connections after shutdown")
	}
}

func TestServerHelpListsEveryFlag(t *testing.T) {
	bin, err := testserver.Binary()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "server", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("server --help: %v\n%s", err, out)
	}
	for _, flag := range []string{"--addr", "--data-dir", "--tls-cert-file", "--tls-private-key-file",
		"--log-level", "--log-format", "--examples", "--examples-dir", "--shutdown-timeout", "--allowed-origins",
		"--history-min-revisions", "--history-min-age", "--history-compaction-interval",
		"--service-account-issuer", "--service-account-jwks-uri"} {
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			// A flag line is "--name type  description": the description must be there.
			if len(fields) >= 3 && fields[0] == flag {
				found = true
			}
		}
		if !found {
			t.Errorf("server --help does not document %s:\n%s", flag, out)
		}
	}
}

func TestServerWithUsersOwnCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "users-own-cert"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	s := testserver.Start(t, testserver.Options{Args: []string{"--tls-cert-file", certFile, "--tls-private-key-file", keyFile}})
	resp, err := s.HTTPClient().Get(s.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != "users-own-cert" {
		t.Fatalf("served certificate %q, want the user's", cn)
	}
	if out, stderr, err := s.Kubectl("get", "--raw", "/api"); err != nil {
		t.Fatalf("kubectl with the user's certificate: %v\n%s%s", err, out, stderr)
	}
}
