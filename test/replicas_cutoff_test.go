package test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// leading reads setpoint_leader_election_leading of lease from s's
// /metrics: "1", "0", or what went wrong.
func leading(s *testserver.Server, id, lease string) string {
	code, body, err := s.Do("GET", "/metrics", s.Token, nil)
	if err != nil || code != http.StatusOK {
		return fmt.Sprintf("GET /metrics: %d %v", code, err)
	}
	m := regexp.MustCompile(`(?m)^setpoint_leader_election_leading\{identity="` + regexp.QuoteMeta(id) + `",lease="` + regexp.QuoteMeta(lease) + `"\} (\S+)$`).FindSubmatch(body)
	if m == nil {
		return "no setpoint_leader_election_leading of " + lease
	}
	return string(m[1])
}

// TestReplicasCutOffFromEtcd: replica X reaches etcd through a proxy in
// the test and leads the widget plugin's controller; B and C reach etcd
// directly. When the proxy cuts X's connections and refuses new ones, X
// stops leading within the lease duration (its
// setpoint_leader_election_leading goes to 0), the Lease passes to B or C,
// and Widgets created meanwhile converge. When the proxy heals, X serves
// again as a follower: it does not take the Lease back, Widgets created
// through it converge, and no WidgetProvision is ever created twice or
// deleted (a watch from before the first Widget sees each added once).
func TestReplicasCutOffFromEtcd(t *testing.T) {
	const lease = "setpoint-plugin.widget"
	wasm := wasmModule(t, "widget-c")
	e := etcdtest.Start(t, etcdtest.Options{})
	proxy := testserver.StartProxy(t, strings.TrimPrefix(e.Endpoint, "http://"))
	args := append([]string{"--store", "etcd", "--etcd-servers", "http://" + proxy.Addr, "--etcd-prefix", "/cutoff"}, testserver.ShortLeases...)
	x := testserver.Start(t, testserver.Options{Args: args, LogLevel: "info"})
	xID := replicaIdentity(t, x)
	// X is alone when the plugin is installed: it leads the controller.
	installWidgetPlugin(t, x, wasm)
	testsupport.Poll(t, 20*time.Second, "X leads the widget plugin", func() (bool, string) {
		h, err := leaseHolder(x, lease)
		return h == xID, fmt.Sprintf("holder %q %v", h, err)
	})
	others := testserver.StartReplicas(t, testserver.ReplicasOptions{N: 2, Endpoints: []string{e.Endpoint}, Prefix: "/cutoff", LogLevel: "warn"})
	b := others[0]
	ids := map[string]bool{}
	for _, s := range others {
		ids[replicaIdentity(t, s)] = true
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
	events, err := b.Watch(ctx, "/apis/example.setpoint.dev/v1/namespaces/default/widgetprovisions")
	if err != nil {
		t.Fatal(err)
	}
	accB := &acceptance{t: t, s: b, c: b.HTTPClient()}
	accX := &acceptance{t: t, s: x, c: x.HTTPClient()}
	if err := accB.createWidgets("before", "cutoff", 10, 0, nil); err != nil {
		t.Fatal(err)
	}
	accB.eventually("widgets converged through X", 30*time.Second, func() string { return accB.widgetsConverged("", 10) })

	proxy.Cut()
	cut := time.Now()
	testsupport.Poll(t, 10*time.Second, "X stops leading", func() (bool, string) {
		v := leading(x, xID, lease)
		return v == "0", "setpoint_leader_election_leading " + v
	})
	stopped := time.Since(cut)
	var holder string
	testsupport.Poll(t, 15*time.Second, "another replica takes the lease", func() (bool, string) {
		h, err := leaseHolder(b, lease)
		holder = h
		return ids[h], fmt.Sprintf("holder %q %v", h, err)
	})
	t.Logf("cut off: X stopped leading %.2fs after the cut (lease duration 2s), %s took the lease %.2fs after it", stopped.Seconds(), holder, time.Since(cut).Seconds())
	if stopped > 2*time.Second {
		t.Errorf("X stopped leading %v after the cut, want within the lease duration (2s)", stopped)
	}
	if !strings.Contains(x.Logs(), `lease=`+lease) || !strings.Contains(x.Logs(), "lost lease") {
		t.Errorf("X's log does not say it lost %s", lease)
	}
	if err := accB.createWidgets("during", "cutoff", 10, 0, nil); err != nil {
		t.Fatal(err)
	}
	accB.eventually("widgets converged while X is cut off", 30*time.Second, func() string { return accB.widgetsConverged("", 20) })

	proxy.Heal()
	testsupport.Poll(t, 30*time.Second, "X serves again", func() (bool, string) {
		code, body, err := x.Do("GET", "/readyz", "", nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %s %v", code, body, err)
	})
	if err := accX.createWidgets("after", "cutoff", 10, 0, nil); err != nil {
		t.Fatal(err)
	}
	accX.eventually("widgets created through X converged", 30*time.Second, func() string { return accX.widgetsConverged("", 30) })
	if v := leading(x, xID, lease); v != "0" {
		t.Errorf("X leads the widget plugin again after it healed: setpoint_leader_election_leading %s", v)
	}
	if h, err := leaseHolder(x, lease); err != nil || h != holder {
		t.Errorf("after the heal the lease is held by %q (%v), want still %s", h, err, holder)
	}

	children := accB.list(accProvisions, "")
	testsupport.Poll(t, 10*time.Second, "the watch sees every child", func() (bool, string) {
		added := len(events.AddedAll())
		return added == len(children), fmt.Sprintf("%d added, %d listed", added, len(children))
	})
	cancel()
	if err := events.Err(); err != nil {
		t.Fatalf("watch: %v", err)
	}
	if len(children) != 30 {
		t.Errorf("%d WidgetProvisions, want 30", len(children))
	}
	for _, c := range children {
		if k := events.Added(c.Metadata.Name); k != 1 {
			t.Errorf("WidgetProvision %s added %d times", c.Metadata.Name, k)
		}
	}
	if d := events.Deleted(); d != 0 {
		t.Errorf("%d WidgetProvisions deleted during the run", d)
	}
}
