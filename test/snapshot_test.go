package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/snapshot"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// storeAt lists every key of the Badger store in dir at rev (0: current).
func storeAt(t *testing.T, dir string, rev int64) []store.KeyValue {
	t.Helper()
	db, err := badger.Open(dir, badger.Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20, FreeSpaceReserve: -1})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer db.Close()
	var all []store.KeyValue
	opts := store.ListOptions{Revision: rev, Limit: 100}
	for {
		res, err := db.List(context.Background(), "/", opts)
		if err != nil {
			t.Fatalf("List %s at %d: %v", dir, rev, err)
		}
		all = append(all, res.Items...)
		if res.Continue == "" {
			return all
		}
		opts.Continue = res.Continue
	}
}

// kvDigest is a KeyValue with its value's SHA-256 for its bytes.
type kvDigest struct {
	Key                         string
	Size                        int
	SHA256                      string
	CreateRevision, ModRevision int64
}

// digests shows kvs in a diff without the bytes of every value: go-cmp
// compares []byte element by element, which takes minutes for the
// megabytes of a store's modules under the race detector.
func digests(kvs []store.KeyValue) []kvDigest {
	out := make([]kvDigest, len(kvs))
	for i, kv := range kvs {
		sum := sha256.Sum256(kv.Value)
		out[i] = kvDigest{kv.Key, len(kv.Value), hex.EncodeToString(sum[:]), kv.CreateRevision, kv.ModRevision}
	}
	return out
}

// TestSnapshotSaveRestore takes a snapshot of a server running the widget
// example while clients write, checks it against the source store at the
// snapshot's revision, restores it, and starts a server on the restored
// data directory whose widget plugin reconciles a new Widget.
func TestSnapshotSaveRestore(t *testing.T) {
	wasmModule(t, "widget-plugin")
	s := testserver.Start(t, testserver.Options{Args: []string{"--examples", "--examples-dir", filepath.Join("..", "examples")}, LogLevel: "warn"})
	testsupport.Eventually(t, time.Minute, "the example Plugin widget", func() bool {
		_, _, err := s.Kubectl("get", "plugin.setpoint.dev/widget")
		return err == nil
	})
	if out, errOut, err := s.Kubectl("wait", "--for=condition=Ready", "plugin.setpoint.dev/widget", "--timeout=60s"); err != nil {
		t.Fatalf("widget plugin not ready: %v\n%s%s", err, out, errOut)
	}

	// Bounded write load: 3 clients, 150 Namespaces each at most, until
	// the snapshot is taken.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes atomic.Int64
	for c := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"load-%d-%d"}}`, c, i)
				code, b, err := s.Do("POST", "/api/v1/namespaces", s.Token, strings.NewReader(body))
				if err != nil || code != 201 {
					t.Errorf("create: %d %v %s", code, err, b)
					return
				}
				writes.Add(1)
			}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); writes.Load() < 20 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	file := filepath.Join(t.TempDir(), "backup.snap")
	out, errOut, err := s.Setpoint("snapshot", "save", file)
	during := writes.Load()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("snapshot save: %v\n%s%s", err, out, errOut)
	}
	t.Logf("%s(%d writes before the snapshot ended, %d in all)", out, during, writes.Load())

	out, errOut, err = s.Setpoint("snapshot", "status", file)
	if err != nil {
		t.Fatalf("snapshot status: %v\n%s%s", err, out, errOut)
	}
	m := regexp.MustCompile(`Revision:\s+(\d+)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "(verified)") || !strings.Contains(out, "setpoint.dev/plugins") || !strings.Contains(out, "~setpoint/modules") {
		t.Fatalf("snapshot status output:\n%s", out)
	}
	rev, _ := strconv.ParseInt(m[1], 10, 64)

	// The source's state at the snapshot's revision.
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	// Without --include-secrets the snapshot leaves out the server's
	// identity (CA, keys, token), which the source does keep in its store.
	var want []store.KeyValue
	secrets := 0
	for _, kv := range storeAt(t, filepath.Join(s.DataDir, "store"), rev) {
		if snapshot.IsSecret(kv.Key) {
			secrets++
			continue
		}
		want = append(want, kv)
	}
	if secrets == 0 {
		t.Fatalf("the source store holds no security key (%s) to leave out", serving.IdentityKey)
	}
	t.Logf("source: %d keys (and %d security keys) at the snapshot's revision %d, %d at its end", len(want), secrets, rev, len(storeAt(t, filepath.Join(s.DataDir, "store"), 0)))

	dir := filepath.Join(t.TempDir(), "restored")
	if out, errOut, err := s.Setpoint("snapshot", "restore", file, "--data-dir", dir); err != nil {
		t.Fatalf("snapshot restore: %v\n%s%s", err, out, errOut)
	}
	if got := storeAt(t, filepath.Join(dir, "store"), 0); !reflect.DeepEqual(want, got) {
		t.Fatalf("restored store differs from the source at revision %d (-want +got):\n%s", rev, cmp.Diff(digests(want), digests(got)))
	}
	// Restore refuses a non-empty directory.
	if _, errOut, err := s.Setpoint("snapshot", "restore", file, "--data-dir", dir); err == nil || !strings.Contains(errOut, "not empty") {
		t.Fatalf("restore into a non-empty directory: %v\n%s", err, errOut)
	}

	// A damaged copy fails status.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x55
	bad := filepath.Join(t.TempDir(), "bad.snap")
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := s.Setpoint("snapshot", "status", bad); err == nil || !strings.Contains(errOut, "damaged or truncated") {
		t.Fatalf("status of a damaged file: %v\n%s", err, errOut)
	}

	// A server on the restored directory runs the widget plugin it holds.
	r := testserver.Start(t, testserver.Options{DataDir: dir, LogLevel: "warn"})
	if out, errOut, err := r.Kubectl("wait", "--for=condition=Ready", "plugin.setpoint.dev/widget", "--timeout=60s"); err != nil {
		t.Fatalf("restored widget plugin not ready: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := r.Kubectl("apply", "-f", filepath.Join("..", "examples", "widget", "widget.yaml")); err != nil {
		t.Fatalf("apply widget: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := r.Kubectl("wait", "--for=condition=Ready", "widget.example.setpoint.dev/demo", "--timeout=60s"); err != nil {
		t.Fatalf("widget not reconciled on the restored server: %v\n%s%s", err, out, errOut)
	}
	// resourceVersions continue after the snapshot's revision.
	out, _, err = r.Kubectl("get", "widget.example.setpoint.dev/demo", "-o", "jsonpath={.metadata.resourceVersion}")
	if v, _ := strconv.ParseInt(out, 10, 64); err != nil || v <= rev {
		t.Fatalf("restored server's resourceVersion %q (%v), want above %d", out, err, rev)
	}
}
