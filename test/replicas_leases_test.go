package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

const leasesPath = "/apis/coordination.k8s.io/v1/namespaces/default/leases/"

// replicaIdentity reads the server's leader-election identity from
// setpoint_replica_info on /metrics.
func replicaIdentity(t *testing.T, s *testserver.Server) string {
	t.Helper()
	code, body, err := s.Do("GET", "/metrics", s.Token, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	m := regexp.MustCompile(`(?m)^setpoint_replica_info\{identity="([^"]+)",leader_elect="true"\} 1$`).FindStringSubmatch(string(body))
	if m == nil {
		t.Fatalf("/metrics has no setpoint_replica_info with leader_elect=\"true\":\n%s", grepLines(string(body), "setpoint_replica_info"))
	}
	return m[1]
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// leaseHolder returns the holderIdentity of the Lease default/name as s
// serves it, "" when it is not held or does not exist.
func leaseHolder(s *testserver.Server, name string) (string, error) {
	code, body, err := s.Do("GET", leasesPath+name, s.Token, nil)
	if err != nil {
		return "", err
	}
	if code == http.StatusNotFound {
		return "", nil
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET lease %s: %d %s", name, code, body)
	}
	var l struct {
		Spec struct {
			HolderIdentity string `json:"holderIdentity"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return "", err
	}
	return l.Spec.HolderIdentity, nil
}

// installWidgetPlugin registers the Widget kinds and installs the widget
// plugin through s, waiting until it is loaded.
func installWidgetPlugin(t *testing.T, s *testserver.Server, wasm string) {
	t.Helper()
	for _, f := range []string{"../examples/widget/crd.yaml", "../examples/widget/provision-crd.yaml"} {
		if out, errOut, err := s.Kubectl("apply", "-f", f); err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s%s", f, err, out, errOut)
		}
	}
	if out, errOut, err := s.Kubectl("wait", "--for=condition=Established", "crd/widgets.example.setpoint.dev", "crd/widgetprovisions.example.setpoint.dev", "--timeout=30s"); err != nil {
		t.Fatalf("kubectl wait: %v\n%s%s", err, out, errOut)
	}
	ok(t, s, "plugin", "install", "widget", "--wasm", wasm, "--reconcile", "widgets", "--owns", "widgetprovisions")
}

// TestLeasesOnEtcdServer: a server on etcd elects its controllers by
// default. `kubectl get leases -A` shows the garbage collector's Lease and,
// once the widget plugin is installed, the plugin's, both held by the
// replica's identity; /metrics says so in
// setpoint_leader_election_leading, and `setpoint plugin describe` names
// the holder.
func TestLeasesOnEtcdServer(t *testing.T) {
	wasm := wasmModule(t, "widget-plugin")
	e := etcdtest.Start(t, etcdtest.Options{})
	s := testserver.Start(t, testserver.Options{Args: []string{"--store", "etcd", "--etcd-servers", e.Endpoint, "--etcd-prefix", "/leases"}})
	id := replicaIdentity(t, s)
	if !strings.Contains(s.Logs(), id) {
		t.Errorf("the server's log does not name its identity %s", id)
	}
	leases := func() string {
		out, errOut, err := s.Kubectl("get", "leases", "-A", "--no-headers", "-o", "custom-columns=NS:.metadata.namespace,NAME:.metadata.name,HOLDER:.spec.holderIdentity")
		if err != nil {
			t.Fatalf("kubectl get leases -A: %v\n%s%s", err, out, errOut)
		}
		return out
	}
	held := func(name string) func() (bool, string) {
		want := regexp.MustCompile(`(?m)^default\s+` + regexp.QuoteMeta(name) + `\s+` + regexp.QuoteMeta(id) + `$`)
		return func() (bool, string) {
			out := leases()
			return want.MatchString(out), out
		}
	}
	testsupport.Poll(t, 20*time.Second, "the garbage collector's lease", held("setpoint-garbage-collector"))

	installWidgetPlugin(t, s, wasm)
	testsupport.Poll(t, 20*time.Second, "the widget plugin's lease", held("setpoint-plugin.widget"))

	_, body, err := s.Do("GET", "/metrics", s.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, lease := range []string{"setpoint-garbage-collector", "setpoint-plugin.widget"} {
		line := fmt.Sprintf(`setpoint_leader_election_leading{identity=%q,lease=%q} 1`, id, lease)
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("/metrics lacks %s:\n%s", line, grepLines(string(body), "setpoint_leader_election_leading"))
		}
	}
	out := ok(t, s, "plugin", "describe", "widget")
	if !regexp.MustCompile(`(?m)^Leader:\s+` + regexp.QuoteMeta(id) + ` \(lease default/setpoint-plugin.widget, renewed `).MatchString(out) {
		t.Errorf("plugin describe does not name the leader %s:\n%s", id, out)
	}
}

// TestReplicasFailover: three replicas on a three-member etcd cluster, with
// short leases.
// Widgets are created through the two replicas that do not run the widget
// plugin's controller; the one that does is killed with SIGKILL while they
// converge. Another replica takes the plugin's lease over within 5 s (the
// figure is logged), every widget converges, and no WidgetProvision is
// created twice (a watch from before the first create sees each added once
// and none deleted). SETPOINT_FAILOVER_WIDGETS sets how many Widgets (300;
// make test-replicas runs 1,000).
func TestReplicasFailover(t *testing.T) {
	n := 300
	if v := os.Getenv("SETPOINT_FAILOVER_WIDGETS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10 {
			t.Fatalf("SETPOINT_FAILOVER_WIDGETS=%q: want a number >= 10", v)
		}
	}
	wasm := wasmModule(t, "widget-plugin")
	e := etcdtest.StartCluster(t, 3, etcdtest.Options{})
	args := []string{"--store", "etcd", "--etcd-servers", strings.Join(e.Endpoints, ","), "--etcd-prefix", "/failover",
		"--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms", "--leader-elect-retry-period", "300ms"}
	servers := make([]*testserver.Server, 3)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() { servers[i] = testserver.Start(t, testserver.Options{Args: args, LogLevel: "warn"}) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ids := map[string]*testserver.Server{}
	for _, s := range servers {
		ids[replicaIdentity(t, s)] = s
	}
	if len(ids) != 3 {
		t.Fatalf("replica identities %v are not distinct", ids)
	}
	installWidgetPlugin(t, servers[0], wasm)

	var leader *testserver.Server
	var leaderID string
	testsupport.Poll(t, 20*time.Second, "a replica leads the widget plugin", func() (bool, string) {
		h, err := leaseHolder(servers[0], "setpoint-plugin.widget")
		if err != nil {
			return false, err.Error()
		}
		leaderID, leader = h, ids[h]
		return leader != nil, "holder " + h
	})
	var others []*testserver.Server
	for _, s := range servers {
		if s != leader {
			others = append(others, s)
		}
	}
	// Every replica loads the plugin (admission runs on each): wait until
	// the followers have it too, so that each can take the controller over.
	for _, s := range others {
		testsupport.Poll(t, 60*time.Second, "the widget plugin loaded on a follower", func() (bool, string) {
			_, body, err := s.Do("GET", "/metrics", s.Token, nil)
			if err != nil {
				return false, err.Error()
			}
			return strings.Contains(string(body), `setpoint_plugin_calls_total{plugin="widget"}`), "no setpoint_plugin_calls_total of the widget plugin"
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := others[0].Watch(ctx, "/apis/example.setpoint.dev/v1/namespaces/default/widgetprovisions")
	if err != nil {
		t.Fatal(err)
	}

	accs := []*acceptance{{t: t, s: others[0], c: others[0].HTTPClient()}, {t: t, s: others[1], c: others[1].HTTPClient()}}
	createErr := make(chan error, 2)
	for i, a := range accs {
		go func() { createErr <- a.createWidgets(fmt.Sprintf("via%d", i), "failover", n/2, 0, nil) }()
	}
	// Kill the leader mid-convergence: once some, not all, widgets have
	// their child.
	testsupport.Poll(t, 60*time.Second, "the first children", func() (bool, string) {
		added := len(events.AddedAll())
		return added >= 30, fmt.Sprintf("%d children", added)
	})
	leader.Kill()
	killed := time.Now()
	var takeover time.Duration
	var newID string
	testsupport.Poll(t, 15*time.Second, "another replica takes the widget plugin's lease", func() (bool, string) {
		h, err := leaseHolder(others[0], "setpoint-plugin.widget")
		if err != nil {
			return false, err.Error()
		}
		if h != "" && h != leaderID {
			takeover, newID = time.Since(killed), h
			return true, ""
		}
		return false, "holder " + h
	})
	t.Logf("failover: %s took the widget plugin's lease over %.2fs after %s was killed (lease duration 2s, retry period 0.3s)",
		newID, takeover.Seconds(), leaderID)
	if takeover > 5*time.Second {
		t.Errorf("takeover took %v, want under 5s", takeover)
	}
	for range accs {
		if err := <-createErr; err != nil {
			t.Fatalf("create widgets: %v", err)
		}
	}
	accs[0].eventually("widgets converged after failover", 60*time.Second, func() string {
		return accs[0].widgetsConverged("", n)
	})
	t.Logf("all %d widgets converged %.1fs after the kill", n, time.Since(killed).Seconds())

	// The watch has seen every child the list has.
	children := accs[0].list(accProvisions, "")
	testsupport.Poll(t, 10*time.Second, "the watch sees every child", func() (bool, string) {
		added := len(events.AddedAll())
		return added == len(children), fmt.Sprintf("%d added, %d listed", added, len(children))
	})
	cancel()
	if err := events.Err(); err != nil {
		t.Fatalf("watch: %v", err)
	}
	if len(children) != n {
		t.Errorf("%d WidgetProvisions, want %d", len(children), n)
	}
	for _, c := range children {
		if k, uid := events.Added(c.Metadata.Name), events.UID(c.Metadata.Name); k != 1 || uid != c.Metadata.UID {
			t.Errorf("WidgetProvision %s added %d times (uid %s, listed %s)", c.Metadata.Name, k, uid, c.Metadata.UID)
		}
	}
	if d := events.Deleted(); d != 0 {
		t.Errorf("%d WidgetProvisions deleted during the run", d)
	}
}
