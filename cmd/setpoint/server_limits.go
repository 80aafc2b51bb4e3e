package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/engine/plugins"
	"github.com/setpoint-dev/setpoint/host"
)

// limitFlags are `setpoint server`'s flags that bound what clients may take:
// requests in flight, connections, timeouts and the TLS protocol. Their
// defaults are kube-apiserver's where it has the same flag; see
// docs/RATIONALE.md.
type limitFlags struct {
	maxRequestsInflight         int
	maxMutatingRequestsInflight int
	maxWatches                  int
	maxQueuedPerUser            int
	maxQueued                   int
	queueWaitTimeout            time.Duration
	fairShareSeats              int
	requestTimeout              time.Duration
	watchWriteTimeout           time.Duration
	maxConnections              int
	maxConnectionsPerAddress    int
	handshakeTimeout            time.Duration
	idleTimeout                 time.Duration
	tlsMinVersion               string
	tlsCipherSuites             []string
}

func (l *limitFlags) register(f *pflag.FlagSet) {
	f.IntVar(&l.maxRequestsInflight, "max-requests-inflight", serving.DefaultMaxRequestsInflight, "the most read requests (get, list) served at once; further ones get 429 Too Many Requests with Retry-After; -1 for no limit; requests of the group system:masters are exempt from this and the other in-flight limits, as in kube-apiserver")
	f.IntVar(&l.maxMutatingRequestsInflight, "max-mutating-requests-inflight", serving.DefaultMaxMutatingRequestsInflight, "the most write requests (create, update, patch, delete) served at once; further ones get 429 with Retry-After; -1 for no limit")
	f.IntVar(&l.maxWatches, "max-watches", serving.DefaultMaxWatches, "the most watches (and other long-running requests) open at once, counted apart from the two limits above; further ones get 429 with Retry-After; -1 for no limit")
	f.IntVar(&l.maxQueuedPerUser, "max-queued-requests-per-user", serving.DefaultMaxQueuedRequestsPerUser, "the most reads, and apart the most writes, of one user that wait for a seat once the in-flight limits above are reached; freed seats go to the waiting users in turn; further ones get 429 with Retry-After; -1 turns queuing off (429 at once at the limits)")
	f.IntVar(&l.maxQueued, "max-queued-requests", serving.DefaultMaxQueuedRequests, "the most reads, and apart the most writes, waiting for a seat, all users together; further ones get 429 with Retry-After; -1 for no bound but the one per user")
	f.DurationVar(&l.queueWaitTimeout, "queue-wait-timeout", serving.DefaultQueueWaitTimeout, "how long a read or write may wait for a seat, or for its fair share, before it gets 429 with Retry-After")
	f.IntVar(&l.fairShareSeats, "fair-share-seats", serving.DefaultFairShareSeats(), fmt.Sprintf("the reads and writes in flight, all users together, past which a user already holding its fair share of them (this number over the users active) waits while the other users' requests go on at once; a lone user is never held back; the default is %d per core (GOMAXPROCS); -1 turns it off", serving.DefaultFairShareSeatsPerCPU))
	f.DurationVar(&l.requestTimeout, "request-timeout", serving.DefaultRequestTimeout, "how long a request other than a watch may run, writing its response included; later it fails with 504 Timeout or its connection is cut")
	f.DurationVar(&l.watchWriteTimeout, "watch-write-timeout", serving.DefaultWatchWriteTimeout, "how long one event of a watch over HTTP may take to reach a client before its watch is ended (a client that stops reading); it resumes from its last resourceVersion")
	f.IntVar(&l.maxConnections, "max-connections", 0, fmt.Sprintf("the most client connections open at once; at the limit, the oldest connection that has not yet sent an authenticated request is closed to make room, or the new one is refused; 0 for three quarters of the open-file limit, at most %d", serving.DefaultMaxConnectionsCeiling))
	f.IntVar(&l.maxConnectionsPerAddress, "max-connections-per-address", serving.DefaultMaxConnectionsPerAddress, "the most connections open at once from one client IP address, made room for as for --max-connections")
	f.DurationVar(&l.handshakeTimeout, "tls-handshake-timeout", serving.DefaultHandshakeTimeout, "how long a new connection may take to complete its TLS handshake, and a request to send its headers")
	f.DurationVar(&l.idleTimeout, "idle-connection-timeout", serving.DefaultIdleTimeout, "how long a keep-alive connection may wait for its next request before it is closed")
	f.StringVar(&l.tlsMinVersion, "tls-min-version", serving.DefaultTLSMinVersion, "least TLS version served: VersionTLS12 or VersionTLS13 (kube-apiserver's names)")
	f.StringSliceVar(&l.tlsCipherSuites, "tls-cipher-suites", serving.DefaultTLSCipherSuites, "TLS 1.2 cipher suites served, by IANA name, comma-separated (TLS 1.3 suites are fixed by Go); the default has only ECDHE suites with AES-GCM or ChaCha20-Poly1305, no CBC or SHA-1")
}

// validate checks the flags. Zero values (which the flags' defaults never
// are) stand for the defaults, so that options built without the flags work.
func (l *limitFlags) validate() error {
	for _, c := range []struct {
		name string
		v    int
	}{
		{"--max-requests-inflight", l.maxRequestsInflight},
		{"--max-mutating-requests-inflight", l.maxMutatingRequestsInflight},
		{"--max-watches", l.maxWatches},
		{"--max-queued-requests", l.maxQueued},
	} {
		if c.v < -1 {
			return fmt.Errorf("%s %d: want a positive number, or -1 for no limit", c.name, c.v)
		}
	}
	if l.maxQueuedPerUser < -1 {
		return fmt.Errorf("--max-queued-requests-per-user %d: want a positive number, or -1 to turn queuing off", l.maxQueuedPerUser)
	}
	if l.fairShareSeats < -1 {
		return fmt.Errorf("--fair-share-seats %d: want a positive number, or -1 to turn the fair share off", l.fairShareSeats)
	}
	if l.maxConnections < 0 {
		return fmt.Errorf("--max-connections %d: want a positive number, or 0 for the default", l.maxConnections)
	}
	if l.maxConnectionsPerAddress < 0 {
		return fmt.Errorf("--max-connections-per-address %d: want a positive number", l.maxConnectionsPerAddress)
	}
	for _, c := range []struct {
		name string
		d    time.Duration
	}{
		{"--request-timeout", l.requestTimeout},
		{"--queue-wait-timeout", l.queueWaitTimeout},
		{"--watch-write-timeout", l.watchWriteTimeout},
		{"--tls-handshake-timeout", l.handshakeTimeout},
		{"--idle-connection-timeout", l.idleTimeout},
	} {
		if c.d < 0 {
			return fmt.Errorf("%s %v: want a positive duration", c.name, c.d)
		}
	}
	return l.tls().Apply(&tls.Config{})
}

func (l *limitFlags) tls() serving.TLSOptions {
	suites := make([]string, 0, len(l.tlsCipherSuites))
	for _, s := range l.tlsCipherSuites {
		if s = strings.TrimSpace(s); s != "" {
			suites = append(suites, s)
		}
	}
	return serving.TLSOptions{MinVersion: l.tlsMinVersion, CipherSuites: suites}
}

func (l *limitFlags) requests(h hostLimits) serving.LimitOptions {
	return serving.LimitOptions{
		MaxRequestsInflight:         l.maxRequestsInflight,
		MaxMutatingRequestsInflight: l.maxMutatingRequestsInflight,
		MaxWatches:                  l.maxWatches,
		MaxQueuedRequestsPerUser:    l.maxQueuedPerUser,
		MaxQueuedRequests:           l.maxQueued,
		QueueWaitTimeout:            l.queueWaitTimeout,
		FairShareSeats:              l.fairShareSeats,
		RequestTimeout:              l.requestTimeout,
		LongerTimeout:               uploadTimeout(l.requestTimeout, h.compileTimeout),
		WatchWriteTimeout:           l.watchWriteTimeout,
	}
}

// uploadTimeout gives a module upload the request timeout and the compile
// timeout together: its compile, waiting for a compile slot included, has
// --plugin-compile-timeout, and reading the module, vetting it and storing
// it the usual --request-timeout, so that the compile's own deadline, whose
// refusal names it, is the one a slow compile meets.
func uploadTimeout(request, compile time.Duration) func(*http.Request) time.Duration {
	if request <= 0 {
		request = serving.DefaultRequestTimeout
	}
	if compile <= 0 {
		compile = host.DefaultCompileTimeout
	}
	return func(r *http.Request) time.Duration {
		if r.Method == http.MethodPost && strings.TrimSuffix(r.URL.Path, "/") == plugins.ModulesPath {
			return request + compile
		}
		return 0
	}
}

// timeouts returns the handshake and idle timeouts for http.Server.
func (l *limitFlags) timeouts() (handshake, idle time.Duration) {
	handshake, idle = l.handshakeTimeout, l.idleTimeout
	if handshake == 0 {
		handshake = serving.DefaultHandshakeTimeout
	}
	if idle == 0 {
		idle = serving.DefaultIdleTimeout
	}
	return handshake, idle
}

func (l *limitFlags) conns() serving.ConnOptions {
	return serving.ConnOptions{MaxConnections: l.maxConnections, MaxConnectionsPerAddress: l.maxConnectionsPerAddress}
}
