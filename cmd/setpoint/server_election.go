package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/engine/election"
)

// Lease names, after election's "setpoint-" prefix: each plugin's reconcile
// controller has "plugin." and the plugin's name; the garbage collector, the
// writing of the Plugins' call counters, the garbage collector of modules
// and the finalization of deleted Plugins have one each.
const (
	pluginLeasePrefix   = "plugin."
	gcLease             = "garbage-collector"
	pluginStatusLease   = "plugin-status"
	moduleGCLease       = "module-gc"
	pluginFinalizeLease = "plugin-finalizer"
	leaderElectDefault  = "on with --store etcd, off with --store badger"
)

// leaderElectFlags are `setpoint server`'s leader-election flags, named and
// defaulted as kube-controller-manager's.
type leaderElectFlags struct {
	enabled bool
	// set: --leader-elect was given, so its default does not apply.
	set           bool
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
}

func (o *serverOptions) addLeaderElectFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	l := &o.leaderElect
	f.BoolVar(&l.enabled, "leader-elect", false, "run each plugin's reconcile controller and the garbage collector on one replica at a time, elected through coordination.k8s.io Leases in the default namespace (one per controller, so that controllers spread over the replicas); "+leaderElectDefault+" unless given")
	f.DurationVar(&l.leaseDuration, "leader-elect-lease-duration", election.DefaultLeaseDuration, "how long the other replicas wait, after a lease last changed, before taking it over: the longest failover after a replica dies without releasing its leases")
	f.DurationVar(&l.renewDeadline, "leader-elect-renew-deadline", election.DefaultRenewDeadline, "how long a leader keeps leading without renewing its lease; less than --leader-elect-lease-duration, so that it stops before another replica can take over")
	f.DurationVar(&l.retryPeriod, "leader-elect-retry-period", election.DefaultRetryPeriod, "how often leaders renew their leases and the other replicas try to take them; less than --leader-elect-renew-deadline")
}

// resolveLeaderElect applies --leader-elect's default, which depends on
// --store, and checks the durations.
func (o *serverOptions) resolveLeaderElect() error {
	l := &o.leaderElect
	if !l.set {
		l.enabled = o.storeEtcd.kind == "etcd"
	}
	return l.validate()
}

func (l leaderElectFlags) validate() error {
	switch {
	case l.leaseDuration <= 0:
		return fmt.Errorf("--leader-elect-lease-duration %v: want a positive duration", l.leaseDuration)
	case l.renewDeadline <= 0:
		return fmt.Errorf("--leader-elect-renew-deadline %v: want a positive duration", l.renewDeadline)
	case l.retryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period %v: want a positive duration", l.retryPeriod)
	case l.renewDeadline >= l.leaseDuration:
		return fmt.Errorf("--leader-elect-renew-deadline %v must be less than --leader-elect-lease-duration %v: a leader that cannot renew must stop before another replica may take its lease over",
			l.renewDeadline, l.leaseDuration)
	case l.retryPeriod >= l.renewDeadline:
		return fmt.Errorf("--leader-elect-retry-period %v must be less than --leader-elect-renew-deadline %v: a leader must try to renew at least once before its deadline",
			l.retryPeriod, l.renewDeadline)
	}
	return nil
}

// electionOptions are what newPluginAPI needs to elect its controllers.
func (l leaderElectFlags) options(identity string) *electionOptions {
	if !l.enabled {
		return nil
	}
	return &electionOptions{identity: identity, leaseDuration: l.leaseDuration, renewDeadline: l.renewDeadline, retryPeriod: l.retryPeriod}
}

// electionOptions configure the leader election of newPluginAPI's
// controllers.
type electionOptions struct {
	// identity is this replica's holderIdentity.
	identity                                  string
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

// replicaIdentity names this replica in the leases it holds and in
// /metrics: the host name, which says where it runs, and a random suffix,
// which tells apart replicas on one host and a restarted replica from its
// former self (whose leases it must not take as its own).
func replicaIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "setpoint"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "_" + hex.EncodeToString(b[:])
}

// registerReplicaInfo exports the replica's identity as
// setpoint_replica_info{identity}, always 1, so that /metrics names the
// replica before it leads anything.
func registerReplicaInfo(reg prometheus.Registerer, identity string, leaderElect bool) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "setpoint_replica_info",
		Help:        "Always 1: the identity this replica holds leases as, and whether it takes part in leader election.",
		ConstLabels: prometheus.Labels{"identity": identity, "leader_elect": fmt.Sprint(leaderElect)},
	})
	g.Set(1)
	return reg.Register(g)
}
