package replicas

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

const (
	group     = "/apis/example.setpoint.dev/v1"
	crdPath   = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	nsPath    = "/api/v1/namespaces"
	leasePath = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
)

func widgets(ns string) string { return group + "/namespaces/" + ns + "/widgets" }

// client talks to one server as a tuned client would: HTTP/1.1 over TLS
// with keep-alive and an idle connection for every worker, no compression
// on loopback.
type client struct {
	url, token string
	http       *http.Client
}

func newClient(s *testserver.Server, workers int) *client {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: s.CAPool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		MaxIdleConns:        2 * workers,
		MaxIdleConnsPerHost: 2 * workers,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
	}
	return &client{url: s.URL, token: s.Token, http: &http.Client{Transport: tr}}
}

// do sends one request and reads the whole response.
func (c *client) do(ctx context.Context, method, path, ctype string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// expect sends one request, bounded by a minute, and fails unless the
// answer has status want.
func (c *client) expect(ctx context.Context, want int, method, path, ctype string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	code, b, err := c.do(ctx, method, path, ctype, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if code != want {
		return nil, fmt.Errorf("%s %s: %d %.300s", method, path, code, b)
	}
	return b, nil
}

// deployment is Setpoint as one of the set-ups measured: one server on
// Badger, or one or more replicas on one etcd.
type deployment struct {
	name    string
	servers []*testserver.Server
	clients []*client
	pids    []int // the servers' and, on etcd, etcd's
	etcd    int   // etcd's pid; 0 on Badger
}

// etcdCPU is the CPU time etcd spent so far, in seconds; 0 on Badger.
func (d *deployment) etcdCPU(b *testing.B) float64 {
	if d.etcd == 0 {
		return 0
	}
	s, err := benchtest.ProcessCPU(d.etcd)
	if err != nil {
		b.Fatalf("etcd's CPU: %v", err)
	}
	return s
}

// cpu is the CPU time the deployment's processes (etcd included) spent so
// far, in seconds.
func (d *deployment) cpu(b *testing.B) float64 {
	var sum float64
	for _, pid := range d.pids {
		s, err := benchtest.ProcessCPU(pid)
		if err != nil {
			b.Fatalf("CPU of pid %d: %v", pid, err)
		}
		sum += s
	}
	return sum
}

// idle is the CPU share (1 = one core) the deployment's processes use
// over d when nothing is asked of them: leases, etcd's own upkeep. It is
// part of every per-operation figure, most of it in short runs.
func (d *deployment) idle(b *testing.B, over time.Duration) float64 {
	c0 := d.cpu(b)
	time.Sleep(over)
	return (d.cpu(b) - c0) / over.Seconds()
}

// settle waits, at most limit, until the deployment's processes are nearly
// idle (under a fifth of a core over a second): a plugin just installed is
// still being compiled on every replica. It returns the last idle share.
func (d *deployment) settle(b *testing.B, limit time.Duration) float64 {
	deadline := time.Now().Add(limit)
	for {
		idle := d.idle(b, time.Second)
		if idle < 0.2 || time.Now().After(deadline) {
			return idle
		}
	}
}

// pick is the client of the replica that request i goes to: round robin.
func (d *deployment) pick(i int) *client { return d.clients[i%len(d.clients)] }

// stop stops every server of the deployment (t.Cleanup would too; this
// frees the machine for the next set-up).
func (d *deployment) stop(b *testing.B) {
	for _, c := range d.clients {
		c.http.CloseIdleConnections()
	}
	for _, s := range d.servers {
		if err := s.Stop(); err != nil {
			b.Errorf("%s: stop server: %v", d.name, err)
		}
	}
}

// startBadger starts one server on the embedded store, with the extra
// server flags args.
func startBadger(b *testing.B, workers int, args ...string) *deployment {
	s := testserver.Start(b, testserver.Options{Args: args, LogLevel: "warn"})
	return &deployment{name: "Badger", servers: []*testserver.Server{s}, clients: []*client{newClient(s, workers)}, pids: []int{s.Pid()}}
}

// startReplicas starts n replicas on the etcd e under prefix, with the
// extra server flags extra: the first
// alone, so that it takes the leases of the controllers every replica runs
// (the garbage collector's), then the others at once.
func startReplicas(b *testing.B, name string, e *etcdtest.Server, etcdPID, n int, prefix string, workers int, extra ...string) *deployment {
	args := append([]string{"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", prefix}, extra...)
	servers := make([]*testserver.Server, n)
	servers[0] = testserver.Start(b, testserver.Options{Args: args, LogLevel: "warn"})
	var wg sync.WaitGroup
	for i := range servers[1:] {
		wg.Go(func() { servers[i+1] = testserver.Start(b, testserver.Options{Args: args, LogLevel: "warn"}) })
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	d := &deployment{name: name, servers: servers}
	for _, s := range servers {
		d.clients = append(d.clients, newClient(s, workers))
		d.pids = append(d.pids, s.Pid())
	}
	d.pids = append(d.pids, etcdPID)
	d.etcd = etcdPID
	return d
}

// etcdPID finds the etcd process of e by its data directory.
func etcdPID(b *testing.B, e *etcdtest.Server) int {
	pid, err := benchtest.FindPID("--data-dir", e.Dir)
	if err != nil {
		b.Fatalf("etcd's pid: %v", err)
	}
	return pid
}

// applyYAML creates the object in the YAML file (relative to the module
// root) at path through c.
func applyYAML(b *testing.B, c *client, file, path string) {
	y, err := os.ReadFile(filepath.Join(testserver.ModuleRoot(b), file))
	if err != nil {
		b.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		b.Fatalf("%s: %v", file, err)
	}
	if _, err := c.expect(context.Background(), http.StatusCreated, "POST", path, "application/json", j); err != nil {
		b.Fatal(err)
	}
}

// registerWidget registers the Widget kind (and, with provisions, the
// WidgetProvision kind) through the first replica and waits until every
// replica serves them.
func registerWidget(b *testing.B, d *deployment, provisions bool) {
	if provisions {
		registerKinds(b, d, []string{"examples/widget/crd.yaml", "examples/widget/provision-crd.yaml"}, []string{"widgets", "widgetprovisions"})
		return
	}
	registerKinds(b, d, []string{"examples/widget/crd.yaml"}, []string{"widgets"})
}

// registerKinds creates the CRDs in files through the first replica and
// waits until every replica serves the plurals (of example.setpoint.dev).
func registerKinds(b *testing.B, d *deployment, files, plurals []string) {
	for _, f := range files {
		applyYAML(b, d.clients[0], f, crdPath)
	}
	for _, c := range d.clients {
		for _, plural := range plurals {
			p := group + "/namespaces/default/" + plural
			waitFor(b, time.Minute, "GET "+p+" on "+c.url, func() (bool, string) {
				code, body, err := c.do(context.Background(), "GET", p+"?limit=1", "", nil)
				if err != nil {
					return false, err.Error()
				}
				return code == http.StatusOK, fmt.Sprintf("%d %.200s", code, body)
			})
		}
	}
}

func createNamespace(b *testing.B, d *deployment, ns string) {
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns)
	if _, err := d.clients[0].expect(context.Background(), http.StatusCreated, "POST", nsPath, "application/json", []byte(body)); err != nil {
		b.Fatal(err)
	}
	for _, c := range d.clients[1:] {
		waitFor(b, 30*time.Second, "namespace "+ns+" on "+c.url, func() (bool, string) {
			code, _, err := c.do(context.Background(), "GET", nsPath+"/"+ns, "", nil)
			return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v", code, err)
		})
	}
}

// waitFor polls cond every 50 ms until it holds, failing b after timeout
// with cond's last word.
func waitFor(b *testing.B, timeout time.Duration, what string, cond func() (bool, string)) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within %v: %s", what, timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metrics reads /metrics of the server behind c.
func (c *client) metrics(ctx context.Context) (string, error) {
	b, err := c.expect(ctx, http.StatusOK, "GET", "/metrics", "", nil)
	return string(b), err
}

var replicaInfo = regexp.MustCompile(`(?m)^setpoint_replica_info\{identity="([^"]+)"`)

// identities maps each replica's leader-election identity (from
// setpoint_replica_info on /metrics) to its index.
func identities(b *testing.B, d *deployment) map[string]int {
	ids := map[string]int{}
	for i, c := range d.clients {
		m, err := c.metrics(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		id := replicaInfo.FindStringSubmatch(m)
		if id == nil {
			b.Fatalf("%s replica %d: /metrics has no setpoint_replica_info", d.name, i)
		}
		ids[id[1]] = i
	}
	return ids
}

// leaders says which replica holds each Lease of the default namespace,
// as "lease=replica N" pairs in the leases' order.
func leaders(b *testing.B, d *deployment, ids map[string]int) string {
	body, err := d.clients[0].expect(context.Background(), http.StatusOK, "GET", leasePath, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	var l struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				HolderIdentity string `json:"holderIdentity"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, it := range l.Items {
		who := "none"
		if i, ok := ids[it.Spec.HolderIdentity]; ok {
			who = fmt.Sprintf("replica %d", i)
		} else if it.Spec.HolderIdentity != "" {
			who = it.Spec.HolderIdentity
		}
		out = append(out, it.Metadata.Name+" on "+who)
	}
	slices.Sort(out)
	if len(out) == 0 {
		return "no leases"
	}
	return strings.Join(out, ", ")
}
