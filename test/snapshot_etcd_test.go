package test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/store/snapshot"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// etcdStoreAt lists every key of the store under prefix in etcd.
func etcdStoreAt(t *testing.T, endpoint, prefix string) []store.KeyValue {
	t.Helper()
	db, err := etcd.Open(etcd.Options{Endpoints: []string{endpoint}, Prefix: prefix, CompactionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var all []store.KeyValue
	opts := store.ListOptions{Limit: 100}
	for {
		res, err := db.List(context.Background(), "/", opts)
		if err != nil {
			t.Fatalf("List %s: %v", prefix, err)
		}
		all = append(all, res.Items...)
		if res.Continue == "" {
			return all
		}
		opts.Continue = res.Continue
	}
}

// TestSnapshotRestoreIntoEtcd takes a snapshot of a server on Badger
// running the widget example, restores it into an empty etcd prefix
// (refused into one that holds keys), checks that every key holds the
// source's document at the snapshot's revision, at a revision past the
// snapshot's, that a list at the snapshot's resourceVersion gets 410, and
// that a server on the restored prefix runs the widget plugin it holds.
// (30-45 s: two servers, each with a plugin that must reconcile, as
// TestSnapshotSaveRestore.)
func TestSnapshotRestoreIntoEtcd(t *testing.T) {
	wasmModule(t, "widget-plugin")
	s := testserver.Start(t, testserver.Options{Args: []string{"--examples", "--examples-dir", filepath.Join("..", "examples")}, LogLevel: "warn"})
	testsupport.Eventually(t, time.Minute, "the example Plugin widget", func() bool {
		_, _, err := s.Kubectl("get", "plugin.setpoint.dev/widget")
		return err == nil
	})
	if out, errOut, err := s.Kubectl("wait", "--for=condition=Ready", "plugin.setpoint.dev/widget", "--timeout=60s"); err != nil {
		t.Fatalf("widget plugin not ready: %v\n%s%s", err, out, errOut)
	}
	for i := range 10 {
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"restore-%d"}}`, i)
		if code, b, err := s.Do(http.MethodPost, "/api/v1/namespaces", s.Token, strings.NewReader(body)); err != nil || code != http.StatusCreated {
			t.Fatalf("create: %d %v %s", code, err, b)
		}
	}
	file := filepath.Join(t.TempDir(), "backup.snap")
	out, errOut, err := s.Setpoint("snapshot", "save", file)
	if err != nil {
		t.Fatalf("snapshot save: %v\n%s%s", err, out, errOut)
	}
	m := regexp.MustCompile(`revision (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("snapshot save output: %s", out)
	}
	rev, _ := strconv.ParseInt(m[1], 10, 64)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, kv := range storeAt(t, filepath.Join(s.DataDir, "store"), rev) {
		if !snapshot.IsSecret(kv.Key) {
			want[kv.Key] = string(kv.Value)
		}
	}

	e := etcdtest.Start(t, etcdtest.Options{})
	restore := func(prefix string) (string, string, error) {
		return s.Setpoint("snapshot", "restore", file, "--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", prefix)
	}
	out, errOut, err = restore("/restored")
	if err != nil {
		t.Fatalf("snapshot restore --store etcd: %v\n%s%s", err, out, errOut)
	}
	t.Logf("%s", out)
	got := map[string]string{}
	for _, kv := range etcdStoreAt(t, e.Endpoint, "/restored") {
		got[kv.Key] = string(kv.Value)
		if kv.ModRevision <= rev || kv.CreateRevision <= rev {
			t.Errorf("%s restored at revisions %d/%d, want past the snapshot's %d", kv.Key, kv.CreateRevision, kv.ModRevision, rev)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("the etcd prefix differs from the source at the snapshot's revision %d (-want +got):\n%.3000s", rev, d)
	}
	if _, errOut, err := restore("/restored"); err == nil || !strings.Contains(errOut, "holds") {
		t.Fatalf("restore into a prefix that holds keys: %v\n%s", err, errOut)
	}

	// A server on the restored prefix.
	r := testserver.Start(t, testserver.Options{LogLevel: "warn", Args: []string{
		"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/restored"}})
	code, body, err := r.Do(http.MethodGet, "/api/v1/namespaces/restore-7", r.Token, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET a restored namespace: %d %v %s", code, err, body)
	}
	code, body, err = r.Do(http.MethodGet, fmt.Sprintf("/api/v1/namespaces?resourceVersion=%d&resourceVersionMatch=Exact", rev), r.Token, nil)
	if err != nil || code != http.StatusGone {
		t.Errorf("list at the snapshot's resourceVersion %d on the restored server: %d %v %.300s, want 410 Gone", rev, code, err, body)
	}
	if out, errOut, err := r.Kubectl("wait", "--for=condition=Ready", "plugin.setpoint.dev/widget", "--timeout=60s"); err != nil {
		t.Fatalf("restored widget plugin not ready: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := r.Kubectl("apply", "-f", filepath.Join("..", "examples", "widget", "widget.yaml")); err != nil {
		t.Fatalf("apply widget: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := r.Kubectl("wait", "--for=condition=Ready", "widget.example.setpoint.dev/demo", "--timeout=60s"); err != nil {
		t.Fatalf("widget not reconciled on the server restored into etcd: %v\n%s%s", err, out, errOut)
	}
}
