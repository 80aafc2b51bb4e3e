package test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving/oidctest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// writeTokenFile writes a token file through a rename, as editors and
// configuration tools replace files.
func writeTokenFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// tokenKubeconfig writes a kubeconfig for s in which the user presents
// token, and returns its path.
func tokenKubeconfig(t *testing.T, s *testserver.Server, name, token string) string {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["setpoint"] = admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "setpoint", AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectlAs runs kubectl with the kubeconfig at path.
func kubectlAs(s *testserver.Server, kubeconfig string, args ...string) (string, string, error) {
	return s.Kubectl(append([]string{"--kubeconfig", kubeconfig}, args...)...)
}

// whoami is what `kubectl auth whoami` printed: the user name and groups.
func whoami(t *testing.T, out string) (string, []string) {
	t.Helper()
	name := regexp.MustCompile(`(?m)^Username\s+(\S+)$`).FindStringSubmatch(out)
	groups := regexp.MustCompile(`(?m)^Groups\s+\[(.*)\]$`).FindStringSubmatch(out)
	if name == nil || groups == nil {
		t.Fatalf("kubectl auth whoami printed:\n%s", out)
	}
	return name[1], strings.Fields(groups[1])
}

// assertWhoami checks `kubectl auth whoami` with kubeconfig.
func assertWhoami(t *testing.T, s *testserver.Server, kubeconfig, wantUser string, wantGroups []string, extra ...string) {
	t.Helper()
	out, stderr, err := kubectlAs(s, kubeconfig, append([]string{"auth", "whoami"}, extra...)...)
	if err != nil {
		t.Fatalf("kubectl auth whoami %s: %v\n%s%s", strings.Join(extra, " "), err, out, stderr)
	}
	name, groups := whoami(t, out)
	if name != wantUser || !slices.Equal(groups, wantGroups) {
		t.Errorf("kubectl auth whoami %s: %s in %v, want %s in %v", strings.Join(extra, " "), name, groups, wantUser, wantGroups)
	}
}

// retryUntil retries check until it returns nil, for at most 20 seconds.
func retryUntil(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clientsetFor returns a typed client-go clientset for kubeconfig.
func clientsetFor(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return clientsetForConfig(t, cfg)
}

func clientsetForConfig(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// selfReview asks the server who cs authenticates as.
func selfReview(cs *kubernetes.Clientset) (authenticationv1.UserInfo, error) {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

// TestAuthentication runs one server with a static token file and an OIDC
// issuer on loopback, and checks each way in with kubectl and client-go:
// token file users (and the file's reload), client certificates from
// `setpoint kubeconfig create`, OIDC ID tokens, impersonation, and that
// users other than the admin authenticate but may do nothing else without
// an authorization policy. No token reaches the log.
func TestAuthentication(t *testing.T) {
	iss := oidctest.New(t)
	tokenFile := filepath.Join(t.TempDir(), "tokens.csv")
	writeTokenFile(t, tokenFile, "alice-token-0123456789,alice,uid-alice,\"dev,ops\"\n")
	s := testserver.Start(t, testserver.Options{LogLevel: "debug", Args: []string{
		"--token-auth-file", tokenFile,
		"--oidc-issuer-url", iss.URL, "--oidc-client-id", "setpoint", "--oidc-ca-file", iss.CAFile,
		"--oidc-username-claim", "email", "--oidc-groups-claim", "groups", "--oidc-groups-prefix", "oidc:",
	}})
	alice := tokenKubeconfig(t, s, "alice", "alice-token-0123456789")
	secrets := []string{"alice-token-0123456789", "bob-token-9876543210"}

	t.Run("token file user", func(t *testing.T) {
		assertWhoami(t, s, alice, "alice", []string{"dev", "ops", "system:authenticated"})
		ui, err := selfReview(clientsetFor(t, alice))
		if err != nil || ui.Username != "alice" || ui.UID != "uid-alice" {
			t.Fatalf("client-go SelfSubjectReview: %+v, %v", ui, err)
		}
		// Authenticated, but without a policy only the admin may act.
		_, err = clientsetFor(t, alice).CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "alice" cannot list resource "namespaces"`) {
			t.Errorf("alice lists namespaces: %v, want 403", err)
		}
		if out, stderr, err := kubectlAs(s, alice, "create", "namespace", "alices"); err == nil || !strings.Contains(strings.ToLower(stderr), "forbidden") {
			t.Errorf("kubectl create namespace as alice: %v\n%s%s, want forbidden", err, out, stderr)
		}
		if _, stderr, err := s.Setpoint("kubeconfig", "create", "mallory", "--group", "system:masters", "--kubeconfig", alice); err == nil || !strings.Contains(stderr, "forbidden") {
			t.Errorf("setpoint kubeconfig create as alice: %v\n%s, want forbidden", err, stderr)
		}
	})

	t.Run("impersonation", func(t *testing.T) {
		// The admin, in system:masters, may act as anyone.
		assertWhoami(t, s, s.Kubeconfig, "dave", []string{"qa", "system:authenticated"}, "--as=dave", "--as-group=qa")
		assertWhoami(t, s, s.Kubeconfig, "system:serviceaccount:default:builder",
			[]string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}, "--as=system:serviceaccount:default:builder")
		cfg := s.RESTConfig()
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "erin", Groups: []string{"dev"}, UID: "uid-erin"}
		ui, err := selfReview(clientsetForConfig(t, cfg))
		if err != nil || ui.Username != "erin" || ui.UID != "uid-erin" || !slices.Equal(ui.Groups, []string{"dev", "system:authenticated"}) {
			t.Errorf("client-go impersonating erin: %+v, %v", ui, err)
		}
		// Impersonated users are held to their own rights.
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "dave"}
		_, err = clientsetForConfig(t, cfg).CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "dave" cannot list resource "namespaces"`) {
			t.Errorf("listing namespaces as dave: %v, want dave's 403", err)
		}
		// alice lacks the impersonate verb.
		for _, args := range [][]string{
			{"auth", "whoami", "--as=setpoint-admin"},
			{"get", "namespaces", "--as=setpoint-admin", "--as-group=system:masters"},
		} {
			out, stderr, err := kubectlAs(s, alice, args...)
			if err == nil || strings.Contains(out, "setpoint-admin") {
				t.Errorf("kubectl %s as alice: %v\n%s%s, want refused", strings.Join(args, " "), err, out, stderr)
			}
		}
		if _, stderr, err := kubectlAs(s, alice, "auth", "can-i", "create", "namespaces", "--as=setpoint-admin"); !strings.Contains(stderr, `User "alice" cannot impersonate resource "users" in API group "" at the cluster scope`) {
			t.Errorf("kubectl auth can-i --as as alice: %v\n%s, want the impersonation 403", err, stderr)
		}
		cfg = rest.CopyConfig(mustConfig(t, alice))
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "setpoint-admin", Groups: []string{"system:masters"}}
		if _, err := selfReview(clientsetForConfig(t, cfg)); !apierrors.IsForbidden(err) {
			t.Errorf("client-go as alice impersonating the admin: %v, want 403", err)
		}
	})

	t.Run("client certificate", func(t *testing.T) {
		carol := filepath.Join(t.TempDir(), "carol.kubeconfig")
		if out, stderr, err := s.Setpoint("kubeconfig", "create", "carol", "--group", "qa", "--group", "dev", "--expiration", "2h", "-o", carol); err != nil {
			t.Fatalf("setpoint kubeconfig create: %v\n%s%s", err, out, stderr)
		}
		if fi, err := os.Stat(carol); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("kubeconfig %v, %v: want mode 0600", fi, err)
		}
		assertWhoami(t, s, carol, "carol", []string{"qa", "dev", "system:authenticated"})
		cfg := mustConfig(t, carol)
		if len(cfg.CertData) == 0 || len(cfg.KeyData) == 0 || cfg.BearerToken != "" {
			t.Fatalf("kubeconfig: want a client certificate and key and no token")
		}
		ui, err := selfReview(clientsetForConfig(t, cfg))
		if err != nil || ui.Username != "carol" || len(ui.Extra["authentication.kubernetes.io/credential-id"]) == 0 {
			t.Errorf("client-go SelfSubjectReview with the certificate: %+v, %v", ui, err)
		}
		certs, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		if err != nil {
			t.Fatal(err)
		}
		if left := time.Until(certs.Leaf.NotAfter); left > 2*time.Hour || left < time.Hour {
			t.Errorf("certificate valid for %v more, want about 2h", left)
		}
		if _, err := clientsetForConfig(t, cfg).CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("carol lists namespaces: %v, want 403", err)
		}
	})

	t.Run("OIDC", func(t *testing.T) {
		claims := oidctest.Claims{"sub": "77", "aud": "setpoint", "email": "ann@example.com", "groups": []string{"admins"}}
		ann := tokenKubeconfig(t, s, "ann", iss.Token(t, claims))
		// The server fetches the issuer's keys in the background.
		retryUntil(t, "OIDC token accepted", func() error {
			_, err := selfReview(clientsetFor(t, ann))
			return err
		})
		assertWhoami(t, s, ann, "ann@example.com", []string{"oidc:admins", "system:authenticated"})
		for name, c := range map[string]oidctest.Claims{
			"expired":        {"sub": "77", "aud": "setpoint", "email": "ann@example.com", "exp": time.Now().Add(-time.Minute).Unix()},
			"wrong audience": {"sub": "77", "aud": "another-app", "email": "ann@example.com"},
		} {
			tok := iss.Token(t, c)
			secrets = append(secrets, tok)
			if _, err := selfReview(clientsetFor(t, tokenKubeconfig(t, s, "ann", tok))); !apierrors.IsUnauthorized(err) {
				t.Errorf("%s ID token: %v, want 401", name, err)
			}
		}
		forged := iss.ForgedToken(t, claims)
		secrets = append(secrets, forged)
		if out, stderr, err := kubectlAs(s, tokenKubeconfig(t, s, "ann", forged), "auth", "whoami"); err == nil || !strings.Contains(stderr, "Unauthorized") && !strings.Contains(stderr, "provide credentials") {
			t.Errorf("kubectl with a forged ID token: %v\n%s%s, want Unauthorized", err, out, stderr)
		}
	})

	t.Run("anonymous", func(t *testing.T) {
		code, body, err := s.Do(http.MethodGet, "/api/v1/namespaces", "", nil)
		var st metav1.Status
		if err != nil || code != http.StatusUnauthorized || json.Unmarshal(body, &st) != nil || st.Kind != "Status" || st.Reason != metav1.StatusReasonUnauthorized {
			t.Errorf("anonymous list: %d %s %v, want a 401 Status", code, body, err)
		}
		if code, _, err := s.Do(http.MethodGet, "/readyz", "", nil); err != nil || code != http.StatusOK {
			t.Errorf("anonymous /readyz: %d %v", code, err)
		}
		const wrong = "not-a-valid-token-42"
		secrets = append(secrets, wrong)
		if code, _, err := s.Do(http.MethodGet, "/api", wrong, nil); err != nil || code != http.StatusUnauthorized {
			t.Errorf("a wrong token: %d %v, want 401", code, err)
		}
		retryUntil(t, "the refusal logged", func() error {
			if !strings.Contains(s.Logs(), `msg="authentication failed" path=/api err="invalid bearer token"`) {
				return os.ErrNotExist
			}
			return nil
		})
	})

	// Last, as it replaces alice's token with bob's.
	t.Run("token file reload", func(t *testing.T) {
		bob := tokenKubeconfig(t, s, "bob", "bob-token-9876543210")
		writeTokenFile(t, tokenFile, "bob-token-9876543210,bob,uid-bob,viewers\n")
		retryUntil(t, "bob's new token accepted", func() error {
			_, err := selfReview(clientsetFor(t, bob))
			return err
		})
		assertWhoami(t, s, bob, "bob", []string{"viewers", "system:authenticated"})
		retryUntil(t, "alice's removed token refused", func() error {
			if _, err := selfReview(clientsetFor(t, alice)); !apierrors.IsUnauthorized(err) {
				return err
			}
			return nil
		})
		// A file that does not parse keeps bob's token.
		writeTokenFile(t, tokenFile, "bob-token-9876543210,bob\n")
		retryUntil(t, "the bad file logged", func() error {
			if _, err := selfReview(clientsetFor(t, bob)); err != nil {
				t.Fatalf("bob's token after a bad file: %v", err)
			}
			if !strings.Contains(s.Logs(), "line 1: want at least 3 fields") {
				return os.ErrNotExist
			}
			return nil
		})
	})

	logs := s.Logs()
	for _, tok := range secrets {
		if strings.Contains(logs, tok) {
			t.Errorf("the server log holds a token (%d bytes)", len(tok))
		}
	}
}

// mustConfig loads a client-go configuration from kubeconfig.
func mustConfig(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
