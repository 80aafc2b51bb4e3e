package test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
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
	"k8s.io/utils/ptr"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// tokenClaims are the claims of a ServiceAccount token the test reads.
type tokenClaims struct {
	Iss        string   `json:"iss"`
	Sub        string   `json:"sub"`
	Aud        audience `json:"aud"`
	Exp        int64    `json:"exp"`
	Iat        int64    `json:"iat"`
	Nbf        int64    `json:"nbf"`
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
		// Secret is the Secret a bound token is bound to.
		Secret *struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"secret"`
	} `json:"kubernetes.io"`
}

// audience is a JWT's aud: a string or an array of strings (RFC 7519).
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*a = audience{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(a))
}

func decodeClaims(t *testing.T, tok string) tokenClaims {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("the token is not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c tokenClaims
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServiceAccountTokens creates a ServiceAccount and tokens for it with
// kubectl and client-go, authenticates with them, and sees them refused
// for another audience and once the ServiceAccount is deleted, even when
// one of the same name is created again.
func TestServiceAccountTokens(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := s.Kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
		return stdout
	}
	// whoamiCode is the status of a SelfSubjectReview made with tok.
	whoamiCode := func(tok string) int {
		t.Helper()
		code, body, err := s.Do(http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", tok,
			strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(body), tok) {
			t.Fatalf("the response quotes the token: %s", body)
		}
		return code
	}

	run("create", "namespace", "team")
	run("create", "serviceaccount", "robot", "-n", "team")
	if out := run("get", "sa", "-n", "team"); !regexp.MustCompile(`(?m)^robot\s`).MatchString(out) {
		t.Fatalf("kubectl get sa:\n%s", out)
	}
	uid := strings.TrimSpace(run("get", "serviceaccount", "robot", "-n", "team", "-o", "jsonpath={.metadata.uid}"))
	if out := run("explain", "serviceaccount.automountServiceAccountToken"); !strings.Contains(out, "<boolean>") {
		t.Errorf("kubectl explain serviceaccount.automountServiceAccountToken:\n%s", out)
	}

	before := time.Now().Unix()
	tok := strings.TrimSpace(run("create", "token", "robot", "-n", "team", "--duration", "10m"))
	c := decodeClaims(t, tok)
	if c.Iss != "https://kubernetes.default.svc" || c.Sub != "system:serviceaccount:team:robot" ||
		!slices.Equal([]string(c.Aud), []string{"https://kubernetes.default.svc"}) || c.Kubernetes.Namespace != "team" ||
		c.Kubernetes.ServiceAccount.Name != "robot" || c.Kubernetes.ServiceAccount.UID != uid {
		t.Errorf("claims = %+v (ServiceAccount UID %s)", c, uid)
	}
	if c.Exp-c.Iat != 600 || c.Nbf != c.Iat || c.Iat < before-1 || c.Iat > time.Now().Unix()+1 {
		t.Errorf("--duration 10m: iat %d nbf %d exp %d (exp-iat %d), issued between %d and now", c.Iat, c.Nbf, c.Exp, c.Exp-c.Iat, before)
	}

	// kubectl with the token is the ServiceAccount, in Kubernetes' groups.
	out := run("--token", tok, "auth", "whoami")
	if !regexp.MustCompile(`(?m)^Username\s+system:serviceaccount:team:robot$`).MatchString(out) || strings.Contains(out, "system:masters") {
		t.Errorf("kubectl --token auth whoami:\n%s", out)
	}
	for _, g := range []string{"system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"} {
		if !strings.Contains(out, g) {
			t.Errorf("kubectl --token auth whoami lacks group %s:\n%s", g, out)
		}
	}

	// client-go: a token for another audience, asked with CreateToken, is
	// refused by this server; one for the server's audience works.
	admin := kubernetes.NewForConfigOrDie(s.RESTConfig())
	other, err := admin.CoreV1().ServiceAccounts("team").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"https://vault.example"}, ExpirationSeconds: ptr.To[int64](7200)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeClaims(t, other.Status.Token); !slices.Equal([]string(got.Aud), []string{"https://vault.example"}) || got.Exp-got.Iat != 7200 ||
		!other.Status.ExpirationTimestamp.Equal(&metav1.Time{Time: time.Unix(got.Exp, 0)}) {
		t.Errorf("client-go token: claims %+v, status expiry %v", got, other.Status.ExpirationTimestamp)
	}
	if code := whoamiCode(other.Status.Token); code != http.StatusUnauthorized {
		t.Errorf("a token for another audience: %d, want 401", code)
	}
	cfg := rest.AnonymousClientConfig(s.RESTConfig())
	cfg.BearerToken = tok
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("client-go with the token: %v", err)
	}
	if u := review.Status.UserInfo; u.Username != "system:serviceaccount:team:robot" || u.UID != uid {
		t.Errorf("client-go with the token: user %+v", u)
	}

	// Setpoint serves no Pods: a token bound to one is refused as
	// kube-apiserver refuses one bound to a Pod that does not exist.
	if _, stderr, err := s.Kubectl("create", "token", "robot", "-n", "team", "--bound-object-kind", "Pod", "--bound-object-name", "p"); err == nil ||
		strings.TrimSpace(stderr) != `error: failed to create token: pods "p" not found` {
		t.Errorf("kubectl create token --bound-object-kind Pod: %v\n%s", err, stderr)
	}
	if _, stderr, err := s.Kubectl("create", "token", "robot", "-n", "team", "--duration", "5m"); err == nil || !strings.Contains(stderr, "10 minutes") {
		t.Errorf("kubectl create token --duration 5m: %v\n%s", err, stderr)
	}
	if _, stderr, err := s.Kubectl("create", "token", "ghost", "-n", "team"); err == nil || !strings.Contains(stderr, "not found") {
		t.Errorf("kubectl create token for a missing ServiceAccount: %v\n%s", err, stderr)
	}

	// Deleting the ServiceAccount invalidates its tokens within a second.
	run("delete", "serviceaccount", "robot", "-n", "team")
	deadline := time.Now().Add(2 * time.Second)
	for whoamiCode(tok) != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("the token of a deleted ServiceAccount still authenticates")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// One of the same name is another account: the old token stays refused.
	run("create", "serviceaccount", "robot", "-n", "team")
	fresh, err := admin.CoreV1().ServiceAccounts("team").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The fresh token works once the cache has the new account, and by then
	// the old one is judged against the new UID.
	deadline = time.Now().Add(2 * time.Second)
	for whoamiCode(fresh.Status.Token) == http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("the token of the re-created ServiceAccount does not authenticate")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := whoamiCode(tok); code != http.StatusUnauthorized {
		t.Errorf("the old token after re-creating the ServiceAccount: %d, want 401", code)
	}
	if got := decodeClaims(t, fresh.Status.Token); got.Exp-got.Iat != 3600 {
		t.Errorf("default lifetime: exp-iat %d, want 3600", got.Exp-got.Iat)
	}
	if _, err := admin.CoreV1().ServiceAccounts("team").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](60)},
	}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("client-go CreateToken for 60s: %v, want Invalid", err)
	}

	// A restart with --service-account-key-rotate signs with a new key; the
	// token the old key signed still verifies. With --api-audiences naming
	// the other audience too, its token is accepted.
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	r := testserver.Start(t, testserver.Options{DataDir: s.DataDir, Args: []string{"--service-account-key-rotate",
		"--api-audiences", "https://kubernetes.default.svc,https://vault.example"}})
	rotated, _, err := r.Kubectl("create", "token", "robot", "-n", "team")
	if err != nil {
		t.Fatal(err)
	}
	vault, _, err := r.Kubectl("create", "token", "robot", "-n", "team", "--audience", "https://vault.example")
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeClaims(t, strings.TrimSpace(vault)); !slices.Equal([]string(got.Aud), []string{"https://vault.example"}) {
		t.Errorf("kubectl create token --audience: aud %v", got.Aud)
	}
	if kid(t, rotated) == kid(t, fresh.Status.Token) {
		t.Errorf("after --service-account-key-rotate the token's key ID is still %s", kid(t, rotated))
	}
	for name, tok := range map[string]string{"older key": fresh.Status.Token, "new key": strings.TrimSpace(rotated), "other audience": strings.TrimSpace(vault)} {
		code, _, err := r.Do(http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", tok,
			strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		if err != nil || code != http.StatusCreated {
			t.Errorf("a token of the %s after rotation: %d, %v", name, code, err)
		}
	}
}

// kid is the key ID in a token's header.
func kid(t *testing.T, tok string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(strings.TrimSpace(tok), ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Kid string `json:"kid"`
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(b, &h); err != nil || h.Kid == "" || h.Alg != "ES256" {
		t.Fatalf("token header %s: %v", b, err)
	}
	return h.Kid
}
