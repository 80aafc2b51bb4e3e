package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/election"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestPluginAPIElectsAndReleases: with leader election, the server's object
// layer serves Leases, holds the garbage collector's and the counters'
// leases as its identity (in the registry's setpoint_leader_election_leading
// too), and has released them when Run returns, before the store closes.
func TestPluginAPIElectsAndReleases(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	const id = "replica-a_0001"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api, err := newPluginAPI(ctx, pluginAPIOptions{
		store: db, log: slog.New(slog.DiscardHandler), dataDir: t.TempDir(), registerer: reg,
		election: &electionOptions{identity: id, leaseDuration: 2 * time.Second, renewDeadline: 1500 * time.Millisecond, retryPeriod: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- api.Run(ctx) }()

	holder := func(name string) string {
		u, err := api.svc.Get(context.Background(), election.Resource, "default", name, metav1.GetOptions{})
		if err != nil {
			return "error: " + err.Error()
		}
		h, _, _ := unstructured.NestedString(u.Object, "spec", "holderIdentity")
		return h
	}
	leases := []string{"setpoint-" + gcLease, "setpoint-" + pluginStatusLease, "setpoint-" + moduleGCLease, "setpoint-" + pluginFinalizeLease}
	for _, l := range leases {
		testsupport.Poll(t, 10*time.Second, "lease "+l, func() (bool, string) {
			h := holder(l)
			return h == id, h
		})
	}
	testsupport.Eventually(t, 5*time.Second, "the counters reported by this replica", api.reportsCounters.Load)
	testsupport.Eventually(t, 5*time.Second, "the Plugins finalized by this replica", api.finalizesPlugins.Load)
	want := `
# HELP setpoint_leader_election_leading 1 while this replica holds the lease, 0 once it stopped leading.
# TYPE setpoint_leader_election_leading gauge
setpoint_leader_election_leading{identity="replica-a_0001",lease="setpoint-garbage-collector"} 1
setpoint_leader_election_leading{identity="replica-a_0001",lease="setpoint-module-gc"} 1
setpoint_leader_election_leading{identity="replica-a_0001",lease="setpoint-plugin-finalizer"} 1
setpoint_leader_election_leading{identity="replica-a_0001",lease="setpoint-plugin-status"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "setpoint_leader_election_leading"); err != nil {
		t.Error(err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return 20 s after its context ended")
	}
	for _, l := range leases {
		if h := holder(l); h != "" {
			t.Errorf("lease %s held by %q after Run returned, want released", l, h)
		}
	}
}
