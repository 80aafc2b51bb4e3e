package encrypt_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/encrypt"
	"github.com/setpoint-dev/setpoint/store/storetest"
)

// Keys of 32 bytes, base64: what `head -c 32 /dev/urandom | base64` gives.
var (
	key1 = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	key2 = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	key3 = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32))
)

// writeConfig writes an EncryptionConfiguration for resources with the
// providers given as YAML list items, and returns its path.
func writeConfig(t testing.TB, resources string, providers ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [%s]\n  providers:\n", resources)
	for _, p := range providers {
		b.WriteString(p)
	}
	path := filepath.Join(t.TempDir(), "encryption.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func aes(mode, name, secret string) string {
	return fmt.Sprintf("  - %s:\n      keys:\n      - name: %s\n        secret: %s\n", mode, name, secret)
}

func aesKeys(mode string, keys ...[2]string) string {
	s := fmt.Sprintf("  - %s:\n      keys:\n", mode)
	for _, k := range keys {
		s += fmt.Sprintf("      - name: %s\n        secret: %s\n", k[0], k[1])
	}
	return s
}

const identity = "  - identity: {}\n"

func load(t testing.TB, path string) *encrypt.Config {
	t.Helper()
	c, err := encrypt.Load(context.Background(), path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func openBadger(t testing.TB, dir string) store.Store {
	t.Helper()
	db, err := badger.Open(dir, badger.Options{WatchBuffer: 1024, MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db
}

// TestConformance runs the store suite through the wrapper with every
// document the suite writes encrypted.
func TestConformance(t *testing.T) {
	cfg := load(t, writeConfig(t, "widgets.example.setpoint.dev", aes("aesgcm", "k1", key1)))
	open := func(buffer int) func(t *testing.T) store.Store {
		return func(t *testing.T) store.Store {
			db, err := badger.Open(t.TempDir(), badger.Options{WatchBuffer: buffer, MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return encrypt.New(db, cfg)
		}
	}
	storetest.Run(t, open(1024), storetest.Capabilities{NewSlowWatchStore: open(16), SlowWatchBuffer: 16})
}

var secretKey = store.ObjectKey("", "secrets", "default", "db")

const plaintext = `{"apiVersion":"v1","data":{"password":"aHVudGVyMg=="},"kind":"Secret","metadata":{"name":"db"}}`

// TestProviders stores a Secret with each provider and finds its prefix,
// and not the plaintext, in the backend.
func TestProviders(t *testing.T) {
	tests := []struct {
		name, provider, prefix string
	}{
		{"aescbc", aes("aescbc", "first", key1), "k8s:enc:aescbc:v1:first:"},
		{"aesgcm", aes("aesgcm", "first", key1), "k8s:enc:aesgcm:v1:first:"},
		{"secretbox", aes("secretbox", "first", key1), "k8s:enc:secretbox:v1:first:"},
		{"identity", identity, "{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			inner := openBadger(t, t.TempDir())
			st := encrypt.New(inner, load(t, writeConfig(t, "secrets", tt.provider)))
			defer st.Close()
			if _, err := st.Create(ctx, secretKey, []byte(plaintext)); err != nil {
				t.Fatal(err)
			}
			raw, err := inner.Get(ctx, secretKey, store.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(raw.Value, []byte(tt.prefix)) {
				t.Errorf("stored value begins %q, want %q", raw.Value[:min(len(raw.Value), 30)], tt.prefix)
			}
			if enc := tt.name != "identity"; enc == bytes.Contains(raw.Value, []byte("aHVudGVyMg==")) {
				t.Errorf("stored value %q: encrypted %v, holds the plaintext", raw.Value, enc)
			}
			got, err := st.Get(ctx, secretKey, store.GetOptions{})
			if err != nil || string(got.Value) != plaintext {
				t.Fatalf("Get = %q, %v; want the plaintext", got.Value, err)
			}
		})
	}
}

// TestRotation is Kubernetes' rotation: a new key listed first writes, the
// old one still reads (and marks the read stale), a write re-encrypts with
// the new key, and once the old key is gone what it encrypted no longer
// reads, with ErrDecrypt and no data or key in the error.
func TestRotation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	inner := openBadger(t, dir)
	defer inner.Close()
	old := encrypt.New(inner, load(t, writeConfig(t, "secrets", aes("aescbc", "old", key1))))
	rev, err := old.Create(ctx, secretKey, []byte(plaintext))
	if err != nil {
		t.Fatal(err)
	}
	rotated := encrypt.New(inner, load(t, writeConfig(t, "secrets", aesKeys("aescbc", [2]string{"new", key2}, [2]string{"old", key1}))))
	kv, err := rotated.Get(ctx, secretKey, store.GetOptions{})
	if err != nil || string(kv.Value) != plaintext {
		t.Fatalf("Get after rotation = %q, %v", kv.Value, err)
	}
	if !rotated.Stale(secretKey, rev) {
		t.Error("a value read with the second key is not stale")
	}
	if _, err := rotated.Update(ctx, secretKey, kv.Value, rev); err != nil {
		t.Fatal(err)
	}
	raw, _ := inner.Get(ctx, secretKey, store.GetOptions{})
	if !bytes.HasPrefix(raw.Value, []byte("k8s:enc:aescbc:v1:new:")) {
		t.Errorf("rewritten value begins %q, want the new key's prefix", raw.Value[:30])
	}
	if rotated.Stale(secretKey, raw.ModRevision) {
		t.Error("a rewritten value is stale")
	}
	// Only the old key now: the new value does not read.
	gone := encrypt.New(inner, load(t, writeConfig(t, "secrets", aes("aescbc", "old", key1))))
	_, err = gone.Get(ctx, secretKey, store.GetOptions{})
	if !errors.Is(err, encrypt.ErrDecrypt) {
		t.Fatalf("Get with a missing key: %v, want ErrDecrypt", err)
	}
	for _, leak := range []string{"aHVudGVyMg==", key1, key2} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q holds %q", err, leak)
		}
	}
	if !strings.Contains(err.Error(), secretKey) {
		t.Errorf("error %q does not name the document", err)
	}
	// A list fails the same way, and so does a watch's replay.
	if _, err := gone.List(ctx, store.ResourcePrefix("", "secrets", ""), store.ListOptions{}); !errors.Is(err, encrypt.ErrDecrypt) {
		t.Errorf("List with a missing key: %v, want ErrDecrypt", err)
	}
	w, err := gone.Watch(ctx, store.ResourcePrefix("", "secrets", ""), rev-1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for range w.Events() {
	}
	if !errors.Is(w.Err(), encrypt.ErrDecrypt) {
		t.Errorf("watch ended with %v, want ErrDecrypt", w.Err())
	}
}

// TestIdentityFirst: identity first writes plaintext and still reads what
// a key encrypted, the way to turn encryption off; identity alone refuses
// encrypted values.
func TestIdentityFirst(t *testing.T) {
	ctx := context.Background()
	inner := openBadger(t, t.TempDir())
	defer inner.Close()
	enc := encrypt.New(inner, load(t, writeConfig(t, "secrets", aes("secretbox", "k", key3))))
	if _, err := enc.Create(ctx, secretKey, []byte(plaintext)); err != nil {
		t.Fatal(err)
	}
	off := encrypt.New(inner, load(t, writeConfig(t, "secrets", identity, aes("secretbox", "k", key3))))
	other := store.ObjectKey("", "secrets", "default", "other")
	if _, err := off.Create(ctx, other, []byte(plaintext)); err != nil {
		t.Fatal(err)
	}
	if raw, _ := inner.Get(ctx, other, store.GetOptions{}); string(raw.Value) != plaintext {
		t.Errorf("identity first stored %q", raw.Value)
	}
	res, err := off.List(ctx, store.ResourcePrefix("", "secrets", ""), store.ListOptions{})
	if err != nil || len(res.Items) != 2 {
		t.Fatalf("List = %v, %v", res, err)
	}
	for _, it := range res.Items {
		if string(it.Value) != plaintext {
			t.Errorf("%s read %q", it.Key, it.Value)
		}
	}
	only := encrypt.New(inner, load(t, writeConfig(t, "secrets", identity)))
	if _, err := only.Get(ctx, secretKey, store.GetOptions{}); !errors.Is(err, encrypt.ErrDecrypt) {
		t.Errorf("identity alone read an encrypted value: %v", err)
	}
}

// TestUnlisted: what the configuration does not list, and the server's
// private records, pass through as they are.
func TestUnlisted(t *testing.T) {
	ctx := context.Background()
	inner := openBadger(t, t.TempDir())
	defer inner.Close()
	st := encrypt.New(inner, load(t, writeConfig(t, "secrets", aes("aesgcm", "k", key1))))
	for _, k := range []string{store.ObjectKey("", "configmaps", "default", "c"), store.PrivateKey("identity"), store.ObjectKey("example.setpoint.dev", "secrets", "default", "s")} {
		if _, err := st.Create(ctx, k, []byte(plaintext)); err != nil {
			t.Fatal(err)
		}
		if raw, _ := inner.Get(ctx, k, store.GetOptions{}); string(raw.Value) != plaintext {
			t.Errorf("%s stored as %q", k, raw.Value)
		}
	}
}

// TestWatchFilter: a watch and a filtered list of an encrypted resource see
// plaintext, and the watch reports progress.
func TestWatchFilter(t *testing.T) {
	ctx := context.Background()
	inner := openBadger(t, t.TempDir())
	st := encrypt.New(inner, load(t, writeConfig(t, "secrets", aes("aesgcm", "k", key1))))
	defer st.Close()
	prefix := store.ResourcePrefix("", "secrets", "")
	w, err := st.Watch(ctx, prefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev, err := st.Create(ctx, secretKey, []byte(plaintext))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.Events():
		if string(ev.Object.Value) != plaintext {
			t.Errorf("event holds %q", ev.Object.Value)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p, ok := w.Progress(); ok && p >= rev {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no progress")
		}
		time.Sleep(time.Millisecond)
	}
	res, err := st.List(ctx, prefix, store.ListOptions{Filter: func(_ string, v []byte) bool { return bytes.Contains(v, []byte("aHVudGVyMg==")) }})
	if err != nil || len(res.Items) != 1 || string(res.Items[0].Value) != plaintext {
		t.Fatalf("filtered List = %+v, %v", res, err)
	}
}

// TestLoadErrors: KMS is refused, and a bad key's error names the field,
// not the secret.
func TestLoadErrors(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("tooshort-secret-value"))
	tests := []struct {
		name, provider, want string
	}{
		{"kms", "  - kms:\n      apiVersion: v2\n      name: vault\n      endpoint: unix:///tmp/kms.sock\n", "KMS providers are not supported"},
		{"short key", aes("aescbc", "k", short), "secret is not of the expected length"},
		{"not base64", aes("aesgcm", "k", "not*base64*secret"), "secrets must be base64 encoded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := encrypt.Load(context.Background(), writeConfig(t, "secrets", tt.provider))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load: %v, want %q", err, tt.want)
			}
			for _, leak := range []string{short, "tooshort", "not*base64*secret"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q holds the secret", err)
				}
			}
		})
	}
}
