package testserver

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
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

// ReplicasEnv, set to a number above 1, makes Start start a deployment
// instead of one server: an etcd and that many replicas on it, behind a
// Server whose clients spread their requests over the replicas (see
// startDeployment). Tests that give their own store flags or data
// directory still get one server.
const ReplicasEnv = "SETPOINT_TEST_REPLICAS"

// replicasFromEnv is the number of replicas ReplicasEnv asks for; 0 when
// it asks for none.
func replicasFromEnv(t testing.TB, opts Options) int {
	v := os.Getenv(ReplicasEnv)
	if v == "" || opts.DataDir != "" || slices.Contains(opts.Args, "--store") {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("testserver: %s=%q: want a number of replicas", ReplicasEnv, v)
	}
	if n == 1 {
		return 0
	}
	return n
}

// startDeployment starts etcd and n replicas on it and returns a Server
// that stands for all of them: its HTTPClient and RESTConfig send each
// request to the next replica in turn, and its URL and kubeconfig lead to
// a TCP balancer that sends each new connection to the next replica (so
// that each kubectl run may meet another one). A test's write and the read
// or watch that follows it go to different replicas, as they would behind a
// load balancer. Logs joins the replicas' logs; Restart, Crash, Kill and
// Signal are refused.
func startDeployment(t testing.TB, opts Options, n int) *Server {
	t.Helper()
	e := etcdtest.Start(t, etcdtest.Options{})
	rs := StartReplicas(t, ReplicasOptions{N: n, Endpoints: []string{e.Endpoint}, Prefix: "/e2e", Args: opts.Args, Env: opts.Env, LogLevel: opts.LogLevel})
	addrs := make([]string, len(rs))
	for i, r := range rs {
		addrs[i] = r.Addr
	}
	lb := StartBalancer(t, addrs)
	t.Logf("testserver: %d replicas on etcd %s (%s), behind %s", n, e.Endpoint, strings.Join(addrs, ", "), lb.Addr)
	first := rs[0]
	s := &Server{t: t, opts: opts, bin: first.bin, home: t.TempDir(), DataDir: first.DataDir, logs: &syncBuffer{},
		URL: "https://" + lb.Addr, Addr: lb.Addr, Token: first.Token, CAPool: first.CAPool, replicas: rs}
	cfg, err := clientcmd.LoadFromFile(first.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = s.URL
	}
	s.Kubeconfig = filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, s.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return s
}

// spread sends each request to the next of its transports, one per
// replica, with the URL's host set to that replica's.
type spread struct {
	addrs []string
	rts   []http.RoundTripper
	next  atomic.Uint64
}

func (sp *spread) RoundTrip(r *http.Request) (*http.Response, error) {
	i := int(sp.next.Add(1)-1) % len(sp.rts)
	r2 := r.Clone(r.Context())
	r2.URL.Host, r2.Host = sp.addrs[i], ""
	return sp.rts[i].RoundTrip(r2)
}

// spreadTransport is the transport of a deployment's clients.
func (s *Server) spreadTransport() *spread {
	sp := &spread{}
	for _, r := range s.replicas {
		sp.addrs = append(sp.addrs, r.Addr)
		sp.rts = append(sp.rts, &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: s.CAPool, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
		})
	}
	return sp
}
