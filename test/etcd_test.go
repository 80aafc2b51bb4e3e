package test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestServerOnEtcd runs the built server with --store etcd on a real etcd:
// a CRD and objects created, read, listed, watched, updated and deleted with
// kubectl, all kept in etcd under --etcd-prefix (nothing in the data
// directory's store), across a restart, and invisible to a second
// installation under another prefix of the same etcd.
func TestServerOnEtcd(t *testing.T) {
	e := etcdtest.Start(t, etcdtest.Options{})
	s := testserver.Start(t, testserver.Options{Args: []string{"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/e2e"}})
	kubectl := func(t *testing.T, args ...string) string {
		t.Helper()
		out, errOut, err := s.Kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	apply := func(t *testing.T, manifest string) string {
		t.Helper()
		out, errOut, err := s.KubectlInput(manifest, "apply", "-f", "-")
		if err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
		}
		return out
	}

	kubectl(t, "apply", "-f", "../examples/widget/crd.yaml")
	kubectl(t, "wait", "--for=condition=Established", "crd/widgets.example.setpoint.dev", "--timeout=20s")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := s.Command(ctx, "kubectl", "get", "widgets", "-w", "--output-watch-events")
	stdout, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = w.Wait() }()
	events := make(chan []string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			events <- strings.Fields(sc.Text())
		}
	}()

	apply(t, widgetManifest("foo", "small", "env: dev"))
	apply(t, widgetManifest("bar", "medium", "env: prod"))
	waitEvent(t, events, "ADDED", "foo")
	waitEvent(t, events, "ADDED", "bar")
	if got := kubectl(t, "get", "widget", "foo", "-o", "jsonpath={.spec.size}"); got != "small" {
		t.Errorf("get foo: size %q", got)
	}
	if got := kubectl(t, "get", "widgets", "-l", "env=prod", "-o", "jsonpath={.items[*].metadata.name}"); got != "bar" {
		t.Errorf("list -l env=prod: %q", got)
	}
	// Pages of one item each, at one revision.
	if got := kubectl(t, "get", "widgets", "--chunk-size=1", "-o", "jsonpath={.items[*].metadata.name}"); got != "bar foo" {
		t.Errorf("list in chunks of 1: %q", got)
	}
	apply(t, widgetManifest("foo", "large", "env: dev"))
	waitEvent(t, events, "MODIFIED", "foo")
	kubectl(t, "delete", "widget", "bar")
	waitEvent(t, events, "DELETED", "bar")

	// The objects are in etcd, under the prefix; the data directory holds
	// no store.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/e2e/example.setpoint.dev/widgets/default/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != "/e2e/example.setpoint.dev/widgets/default/foo" {
		t.Errorf("etcd keys under /e2e: %v, %+v", err, resp)
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "store")); !os.IsNotExist(err) {
		t.Errorf("the data directory has a store on --store etcd: %v", err)
	}

	// A restart keeps everything.
	cancel()
	_ = w.Wait()
	s.Restart()
	if got := kubectl(t, "get", "widget", "foo", "-o", "jsonpath={.spec.size}"); got != "large" {
		t.Errorf("get foo after a restart: size %q", got)
	}
	if out, _, err := s.Kubectl("get", "widget", "bar"); err == nil {
		t.Errorf("bar is back after a restart: %s", out)
	}
	apply(t, widgetManifest("baz", "small", ""))
	if got := kubectl(t, "get", "widgets", "-o", "jsonpath={.items[*].metadata.name}"); got != "baz foo" {
		t.Errorf("list after a restart: %q", got)
	}

	// Another installation on the same etcd sees none of it.
	other := testserver.Start(t, testserver.Options{Args: []string{"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/other"}})
	if out, errOut, err := other.Kubectl("get", "crd", "-o", "name"); err != nil || strings.Contains(out, "widgets") {
		t.Errorf("CRDs of the installation under /other: %v\n%s%s", err, out, errOut)
	}
}

// TestServerOnEtcdModules: on etcd's default request limit (1.5 MiB), a
// Plugin's module of more than that is uploaded, stored in etcd in chunks
// each under the limit, admits objects, and still runs after a restart.
func TestServerOnEtcdModules(t *testing.T) {
	labels := wasmModule(t, "requiredlabels")
	wasm, err := os.ReadFile(labels)
	if err != nil {
		t.Fatal(err)
	}
	if len(wasm) <= 3<<19 {
		t.Fatalf("module of %d bytes: the test needs one over etcd's default 1.5 MiB limit", len(wasm))
	}
	e := etcdtest.Start(t, etcdtest.Options{})
	s := testserver.Start(t, testserver.Options{Args: []string{"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/mods"}})
	if out, errOut, err := s.Kubectl("apply", "-f", "../examples/widget/crd.yaml"); err != nil {
		t.Fatalf("apply CRD: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := s.Setpoint("plugin", "install", "labels", "--wasm", labels, "--admit", "widgets",
		"--operations", "CREATE,UPDATE", "--config", "labels=team"); err != nil {
		t.Fatalf("plugin install: %v\n%s%s", err, out, errOut)
	}
	refused := func(when string) {
		t.Helper()
		out, errOut, err := s.KubectlInput(widgetManifest("nolabel", "small", ""), "apply", "-f", "-")
		if err == nil || !strings.Contains(errOut, "missing required labels: team") {
			t.Errorf("%s: a widget without the label: %v\n%s%s", when, err, out, errOut)
		}
	}
	refused("after install")

	// The module is in etcd as chunks under the limit whose sizes add up
	// to the module's.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/mods/~setpoint/modulechunks/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, kv := range resp.Kvs {
		if len(kv.Value) > 1<<20 {
			t.Errorf("chunk %s has %d bytes", kv.Key, len(kv.Value))
		}
		total += len(kv.Value)
	}
	if len(resp.Kvs) < 2 || total != len(wasm) {
		t.Errorf("%d chunks holding %d bytes in etcd, want the module's %d", len(resp.Kvs), total, len(wasm))
	}

	s.Restart()
	refused("after a restart")
	if out, errOut, err := s.KubectlInput(widgetManifest("labelled", "small", "team: a"), "apply", "-f", "-"); err != nil {
		t.Errorf("after a restart: a widget with the label: %v\n%s%s", err, out, errOut)
	}
}
