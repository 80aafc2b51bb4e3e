package test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// The secret value the tests write, and what must never show it: its
// base64 form (as data holds it) included.
const secretValue = "s3cr3t-Sentinel-7f1c"

var secretValue64 = base64.StdEncoding.EncodeToString([]byte(secretValue))

// Encryption keys of 32 bytes, as `head -c 32 /dev/urandom | base64` makes
// them.
var (
	encKey1 = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	encKey2 = base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	encKey3 = base64.StdEncoding.EncodeToString([]byte("a wrong key, 32 bytes long......"))
)

// encryptionConfig is an EncryptionConfiguration encrypting secrets with
// aescbc and the keys given as name=secret, the first writing.
func encryptionConfig(keys ...[2]string) string {
	var b strings.Builder
	b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "      - name: %s\n        secret: %s\n", k[0], k[1])
	}
	b.WriteString("  - identity: {}\n")
	return b.String()
}

// storedBadger stops s and returns what its Badger store holds under key,
// as the backend holds it, and every file of the store, to search.
func storedBadger(t *testing.T, s *testserver.Server, key string) (value []byte, files [][]byte) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	dir := filepath.Join(s.DataDir, "store")
	db, err := badger.Open(dir, badger.Options{})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	kv, err := db.Get(context.Background(), key, store.GetOptions{})
	if err != nil {
		db.Close()
		t.Fatalf("get %s: %v", key, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files = append(files, b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return kv.Value, files
}

func anyContains(files [][]byte, s string) bool {
	for _, f := range files {
		if bytes.Contains(f, []byte(s)) {
			return true
		}
	}
	return false
}

// tlsPair writes a self-signed certificate and its key for `kubectl
// create secret tls`.
func tlsPair(t *testing.T) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "web"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

const secretKey = "/core/secrets/default/db"

// TestSecretsEncryptedAtRest writes Secrets and a ConfigMap with kubectl to
// a server with --encryption-provider-config (debug logs, a Metadata audit
// policy for secrets), then reads the Badger store directly: the Secret is
// stored under the aescbc prefix and its first key's name, and no file of
// the store holds its value or the key, while the ConfigMap (not listed)
// is plaintext. A new key listed first still reads the Secret, and kubectl
// replace re-encrypts it with the new key; a server whose only key is wrong
// answers a clear error and keeps serving the rest. Neither the logs, nor
// the audit log, nor an error body shows the value.
func TestSecretsEncryptedAtRest(t *testing.T) {
	dir := t.TempDir()
	cfgPath, auditLog, policy := filepath.Join(dir, "encryption.yaml"), filepath.Join(dir, "audit.log"), filepath.Join(dir, "policy.yaml")
	writeFile := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(cfgPath, encryptionConfig([2]string{"key1", encKey1}))
	// The policy Kubernetes' documentation recommends: Secrets at
	// Metadata (no bodies), everything else with its bodies.
	writeFile(policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources: [{group: \"\", resources: [secrets]}]\n- level: RequestResponse\n")
	s := testserver.Start(t, testserver.Options{LogLevel: "debug", Args: []string{
		"--encryption-provider-config", cfgPath, "--audit-policy-file", policy, "--audit-log-path", auditLog}})
	kubectl := func(args ...string) string {
		t.Helper()
		out, errOut, err := s.Kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	cert, key := tlsPair(t)
	cmFile := filepath.Join(dir, "settings.conf")
	writeFile(cmFile, "settings from a file\n")
	kubectl("create", "secret", "generic", "db", "--from-literal=password="+secretValue, "--from-literal=user=admin")
	kubectl("create", "secret", "tls", "web", "--cert", cert, "--key", key)
	kubectl("create", "configmap", "cfg", "--from-literal=mode=Qz7Kp2Wv9Jx", "--from-file", cmFile)

	if got := kubectl("get", "secret", "db", "-o", "jsonpath={.data.password}"); got != secretValue64 {
		t.Errorf("data.password = %q, want %q", got, secretValue64)
	}
	if got := kubectl("get", "secret", "db", "-o", "jsonpath={.type}|{.stringData}"); got != "Opaque|" {
		t.Errorf("type|stringData = %q, want Opaque and no stringData", got)
	}
	table := kubectl("get", "secrets")
	for _, want := range []string{"NAME", "TYPE", "DATA", "AGE", "kubernetes.io/tls"} {
		if !strings.Contains(table, want) {
			t.Errorf("kubectl get secrets:\n%s\nwants %q", table, want)
		}
	}
	if fields := strings.Fields(strings.Split(table, "\n")[1]); len(fields) != 4 || fields[0] != "db" || fields[1] != "Opaque" || fields[2] != "2" {
		t.Errorf("kubectl get secrets row %q, want db Opaque 2 AGE", fields)
	}
	if cms := kubectl("get", "configmap", "cfg"); !strings.HasPrefix(cms, "NAME") || !strings.Contains(cms, "DATA") || len(strings.Fields(strings.Split(cms, "\n")[1])) != 3 || strings.Fields(strings.Split(cms, "\n")[1])[1] != "2" {
		t.Errorf("kubectl get configmap cfg:\n%s\nwant NAME DATA AGE with 2 keys", cms)
	}
	describe := kubectl("describe", "secret", "db")
	if !strings.Contains(describe, fmt.Sprintf("password:  %d bytes", len(secretValue))) || strings.Contains(describe, secretValue) {
		t.Errorf("kubectl describe secret db:\n%s\nwant the size of password and not its value", describe)
	}
	// Validation refuses without quoting data, with kube-apiserver's fields;
	// data that is not base64 fails to decode (400, as kube-apiserver's
	// decoder answers), without quoting it either.
	code, body, err := s.Do("POST", "/api/v1/namespaces/default/secrets", s.Token, strings.NewReader(
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"bad"},"type":"kubernetes.io/tls","data":{"a*b":"`+secretValue64+`","tls.crt":"`+secretValue64+`"}}`))
	if err != nil || code != 422 {
		t.Fatalf("invalid Secret: %d %v %s", code, err, body)
	}
	for _, want := range []string{`data[a*b]`, `data[tls.key]: Required value`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("error body %s wants %q", body, want)
		}
	}
	if bytes.Contains(body, []byte(secretValue)) || bytes.Contains(body, []byte(secretValue64)) {
		t.Errorf("error body quotes the secret value: %s", body)
	}
	code, body, err = s.Do("POST", "/api/v1/namespaces/default/secrets", s.Token, strings.NewReader(
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"bad"},"data":{"tls.crt":"%%`+secretValue+`"}}`))
	if err != nil || code != 400 || !bytes.Contains(body, []byte("cannot be handled as a Secret: illegal base64 data")) {
		t.Fatalf("Secret with data not in base64: %d %v %s", code, err, body)
	}
	if bytes.Contains(body, []byte(secretValue)) {
		t.Errorf("decoding error quotes the secret value: %s", body)
	}

	// What the store holds.
	leaks := func(what string, files [][]byte) {
		t.Helper()
		for _, s := range []string{secretValue, secretValue64, encKey1, encKey2, "0123456789abcdef0123456789abcdef"} {
			if anyContains(files, s) {
				t.Errorf("%s: a file of the store holds %q", what, s)
			}
		}
	}
	stored, files := storedBadger(t, s, secretKey)
	if !bytes.HasPrefix(stored, []byte("k8s:enc:aescbc:v1:key1:")) {
		t.Errorf("the Secret is stored as %q, want the aescbc prefix and key1", stored[:min(len(stored), 40)])
	}
	leaks("key1", files)
	if !anyContains(files, "Qz7Kp2Wv9Jx") {
		t.Error("the ConfigMap's value is in no file of the store: the search would find nothing")
	}

	// Rotation: key2 first, key1 still reads.
	writeFile(cfgPath, encryptionConfig([2]string{"key2", encKey2}, [2]string{"key1", encKey1}))
	s.Restart()
	if got := kubectl("get", "secret", "db", "-o", "jsonpath={.data.password}"); got != secretValue64 {
		t.Errorf("after rotation data.password = %q", got)
	}
	if out, errOut, err := s.KubectlInput(kubectl("get", "secret", "db", "-o", "json"), "replace", "-f", "-"); err != nil {
		t.Fatalf("kubectl replace: %v %s%s", err, out, errOut)
	}
	stored, files = storedBadger(t, s, secretKey)
	if !bytes.HasPrefix(stored, []byte("k8s:enc:aescbc:v1:key2:")) {
		t.Errorf("after replace the Secret is stored as %q, want key2's prefix", stored[:min(len(stored), 40)])
	}
	leaks("key2", files)

	// A wrong key: a clear error, and the server goes on.
	writeFile(cfgPath, encryptionConfig([2]string{"key2", encKey3}))
	s.Restart()
	out, errOut, err := s.Kubectl("get", "secret", "db", "-o", "json")
	if err == nil {
		t.Fatalf("a Secret read with a wrong key: %s", out)
	}
	if !strings.Contains(errOut, "cannot be decrypted") || !strings.Contains(errOut, secretKey) {
		t.Errorf("kubectl get with a wrong key: %q, want the decryption error naming the Secret", errOut)
	}
	if strings.Contains(out+errOut, secretValue) || strings.Contains(out+errOut, secretValue64) || strings.Contains(errOut, encKey3) {
		t.Errorf("the error shows the value or the key: %s", errOut)
	}
	if got := kubectl("get", "configmap", "cfg", "-o", "jsonpath={.data.mode}"); got != "Qz7Kp2Wv9Jx" {
		t.Errorf("a ConfigMap with the wrong key = %q", got)
	}
	if code, _, err := s.Do("GET", "/readyz", "", nil); err != nil || code != 200 {
		t.Errorf("readyz: %d %v", code, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	logs := s.Logs()
	for _, leak := range []string{secretValue, secretValue64, encKey1, encKey2, encKey3} {
		if strings.Contains(logs, leak) {
			t.Errorf("the server's logs hold %q", leak)
		}
	}
	if !strings.Contains(logs, `msg=request`) || !strings.Contains(logs, "encryption at rest") {
		t.Error("no debug request lines or encryption line in the logs: the search would find nothing")
	}
	audit, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(audit, []byte(secretValue)) || bytes.Contains(audit, []byte(secretValue64)) {
		t.Error("the audit log holds the secret value at Metadata level")
	}
	if !bytes.Contains(audit, []byte(`"resource":"secrets"`)) || !bytes.Contains(audit, []byte("Qz7Kp2Wv9Jx")) {
		t.Error("the audit log has no Secret events, or no ConfigMap bodies at RequestResponse: the search would find nothing")
	}
}

// TestSecretsPlaintextWithoutConfig: a server without
// --encryption-provider-config stores Secrets as they are, as Kubernetes
// does; the search of the other test finds what is there.
func TestSecretsPlaintextWithoutConfig(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	if out, errOut, err := s.Kubectl("create", "secret", "generic", "db", "--from-literal=password="+secretValue); err != nil {
		t.Fatalf("kubectl create secret: %v %s%s", err, out, errOut)
	}
	stored, files := storedBadger(t, s, secretKey)
	if !bytes.HasPrefix(stored, []byte("{")) || !bytes.Contains(stored, []byte(secretValue64)) || !anyContains(files, secretValue64) {
		t.Errorf("without encryption the Secret is stored as %q", stored)
	}
}

// TestSecretsEncryptedOnEtcd: the same on the etcd backend, read from etcd
// directly.
func TestSecretsEncryptedOnEtcd(t *testing.T) {
	e := etcdtest.Start(t, etcdtest.Options{})
	cfgPath := filepath.Join(t.TempDir(), "encryption.yaml")
	if err := os.WriteFile(cfgPath, []byte(encryptionConfig([2]string{"key1", encKey1})), 0o600); err != nil {
		t.Fatal(err)
	}
	s := testserver.Start(t, testserver.Options{Args: []string{"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/enc",
		"--encryption-provider-config", cfgPath}})
	if out, errOut, err := s.Kubectl("create", "secret", "generic", "db", "--from-literal=password="+secretValue); err != nil {
		t.Fatalf("kubectl create secret: %v %s%s", err, out, errOut)
	}
	if out, _, err := s.Kubectl("get", "secret", "db", "-o", "jsonpath={.data.password}"); err != nil || out != secretValue64 {
		t.Errorf("data.password = %q, %v", out, err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/enc"+secretKey)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get: %v %v", resp, err)
	}
	v := resp.Kvs[0].Value
	if !bytes.HasPrefix(v, []byte("k8s:enc:aescbc:v1:key1:")) || bytes.Contains(v, []byte(secretValue)) || bytes.Contains(v, []byte(secretValue64)) {
		t.Errorf("etcd holds %q, want the aescbc prefix and no plaintext", v[:min(len(v), 40)])
	}
}

// TestPluginReadsSecret: a Plugin reads a Secret through the host only
// when its spec.permissions.read names secrets (no spec.privileged needed)
// and RBAC lets its user; it then gets the Secret's data as Kubernetes'
// JSON has it (base64). Without the grant in the spec, or with the rule
// taken out of its ClusterRole, the denial names what is missing.
func TestPluginReadsSecret(t *testing.T) {
	faulty := wasmModule(t, "faulty")
	s := testserver.Start(t, testserver.Options{})
	if out, errOut, err := s.KubectlInput(looseGizmoCRD, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply CRD: %v\n%s%s", err, out, errOut)
	}
	const pluginValue = "plugin-visible-credential"
	if out, errOut, err := s.Kubectl("create", "secret", "generic", "api", "--from-literal=token="+pluginValue); err != nil {
		t.Fatalf("kubectl create secret: %v %s%s", err, out, errOut)
	}
	gizmo := func(name string) {
		t.Helper()
		m := "apiVersion: example.setpoint.dev/v1\nkind: Gizmo\nmetadata: {name: " + name + ", namespace: default}\nspec: {}\n"
		if out, errOut, err := s.KubectlInput(m, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply gizmo: %v %s%s", err, out, errOut)
		}
	}
	get := func(args ...string) string {
		out, _, _ := s.Kubectl(args...)
		return out
	}
	config := []string{"--config", "mode=get", "--config", "apiVersion=v1", "--config", "kind=Secret", "--config", "namespace=default", "--config", "name=api"}

	ok(t, s, append([]string{"plugin", "install", "denied", "--wasm", faulty, "--reconcile", "gizmos", "--permissions", "write=events"}, config...)...)
	gizmo("g1")
	eventually(t, "the denied read on g1", time.Minute, "False/names secrets", func() string {
		c := get("get", "gizmo", "g1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].message}`)
		st, msg, _ := strings.Cut(c, "|")
		if strings.Contains(msg, `plugin "denied" may not read Secret`) {
			msg = "names secrets"
		}
		return st + "/" + msg
	})
	if msg := get("get", "gizmo", "g1", "-o", "json"); strings.Contains(msg, base64.StdEncoding.EncodeToString([]byte(pluginValue))) {
		t.Errorf("a plugin without the grant got the Secret: %s", msg)
	}
	ok(t, s, "plugin", "uninstall", "denied")

	ok(t, s, append([]string{"plugin", "install", "reader", "--wasm", faulty, "--reconcile", "gizmos", "--permissions", "read=secrets,write=events"}, config...)...)
	if got := strings.TrimSpace(get("auth", "can-i", "get", "secrets", "--as", "system:setpoint:plugin:reader")); got != "yes" {
		t.Errorf("kubectl auth can-i get secrets --as the plugin: %q, want yes", got)
	}
	gizmo("g2")
	eventually(t, "the Secret's data in g2's status", time.Minute, base64.StdEncoding.EncodeToString([]byte(pluginValue)), func() string {
		return get("get", "gizmo", "g2", "-o", "jsonpath={.status.object.data.token}")
	})

	// RBAC decides too: an administrator takes the rule out of the
	// plugin's ClusterRole, and the read is denied with the role named.
	const role = "clusterrole/setpoint:plugin:reader"
	var cr rbacv1.ClusterRole
	if err := json.Unmarshal([]byte(get("get", role, "-o", "json")), &cr); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cr.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "secrets") })
	if i < 0 {
		t.Fatalf("%s grants nothing on secrets: %+v", role, cr.Rules)
	}
	for _, args := range [][]string{{"annotate", role, rbacv1.AutoUpdateAnnotationKey + "=false"},
		{"patch", role, "--type=json", "-p", fmt.Sprintf(`[{"op":"remove","path":"/rules/%d"}]`, i)}} {
		if out, errOut, err := s.Kubectl(args...); err != nil {
			t.Fatalf("kubectl %v: %v %s%s", args, err, out, errOut)
		}
	}
	eventually(t, "kubectl auth can-i get secrets for the plugin", 30*time.Second, "no", func() string {
		return strings.TrimSpace(get("auth", "can-i", "get", "secrets", "--as", "system:setpoint:plugin:reader"))
	})
	gizmo("g3")
	eventually(t, "the RBAC denial on g3", time.Minute, "False/denied by RBAC", func() string {
		c := get("get", "gizmo", "g3", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].message}`)
		st, msg, _ := strings.Cut(c, "|")
		if strings.Contains(msg, `cannot get resource "secrets"`) && strings.Contains(msg, "setpoint:plugin:reader") {
			msg = "denied by RBAC"
		}
		return st + "/" + msg
	})
	if out := get("get", "gizmo", "g3", "-o", "jsonpath={.status.object}"); out != "" {
		t.Errorf("a plugin denied by RBAC got the Secret: %s", out)
	}
}
