package testserver

import (
	"strings"
	"sync"
	"testing"
)

// ShortLeases are leader-election flags for tests with several replicas: a
// replica that dies or is cut off is replaced within about 2 s, not the 15 s
// of the defaults.
var ShortLeases = []string{"--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms", "--leader-elect-retry-period", "300ms"}

// ReplicasOptions tunes StartReplicas.
type ReplicasOptions struct {
	// N is the number of replicas; 3 when zero.
	N int
	// Endpoints are the etcd client URLs every replica uses. Required.
	Endpoints []string
	// Prefix is the etcd prefix the replicas share; "/replicas" when empty.
	Prefix string
	// Args are extra `setpoint server` flags, after the store flags and
	// ShortLeases (a flag given again here wins).
	Args []string
	// Env is added to each server's environment.
	Env []string
	// LogLevel is each server's --log-level; "info" when empty.
	LogLevel string
}

// StartReplicas starts N servers at once on one etcd prefix, with short
// leases, and waits until each is ready. They serve the same objects and
// the same identity (the CA, the admin token): a client of one is a client
// of all. Each is stopped at the end of t, as Start's are.
func StartReplicas(t testing.TB, opts ReplicasOptions) []*Server {
	t.Helper()
	if len(opts.Endpoints) == 0 {
		t.Fatal("testserver: StartReplicas needs etcd endpoints")
	}
	if opts.N == 0 {
		opts.N = 3
	}
	if opts.Prefix == "" {
		opts.Prefix = "/replicas"
	}
	args := append([]string{"--store", "etcd", "--etcd-servers", strings.Join(opts.Endpoints, ","), "--etcd-prefix", opts.Prefix}, ShortLeases...)
	args = append(args, opts.Args...)
	servers := make([]*Server, opts.N)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			servers[i] = Start(t, Options{Args: args, Env: opts.Env, LogLevel: opts.LogLevel})
		})
	}
	wg.Wait()
	for i, s := range servers {
		if s == nil {
			t.Fatalf("testserver: replica %d did not start", i)
		}
	}
	return servers
}
