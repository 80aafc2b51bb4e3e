package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
	"github.com/setpoint-dev/setpoint/engine/plugins"
)

func init() { subcommands = append(subcommands, newServerCommand) }

// serverOptions are `setpoint server`'s flags.
type serverOptions struct {
	hostLimits      hostLimits
	addr            string
	dataDir         string
	tlsCertFile     string
	tlsKeyFile      string
	logLevel        string
	logFormat       string
	examples        bool
	examplesDir     string
	pluginCacheDir  string
	shutdownTimeout time.Duration
	allowedOrigins  []string

	historyMinRevisions       int64
	historyMinAge             time.Duration
	historyCompactionInterval time.Duration
	pluginStatusInterval      time.Duration
	watchBookmarkInterval     time.Duration
	moduleGCGrace             time.Duration
	profiling                 bool
	storeFreeSpaceReserve     string
	storeCloseTimeout         time.Duration
	pluginLimits              pluginLimitOptions
	storeEtcd                 etcdFlags
	maxObjectBytes            int
	limits                    limitFlags
	leaderElect               leaderElectFlags
	auth                      authFlags
	serviceAccounts           serviceAccountFlags
	audit                     auditFlags
	encryption                encryptionFlags
}

func newServerCommand() *cobra.Command {
	o := &serverOptions{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the Setpoint control plane",
		Long: `Run the Setpoint control plane: the Kubernetes-compatible API over HTTPS on the
embedded store kept in the data directory.

On first start the server creates, in the data directory, a CA and a serving
certificate for 127.0.0.1, ::1, localhost and the host of --addr (on a
wildcard address, this machine's name and addresses; unless you pass your own
with --tls-cert-file and --tls-private-key-file), an admin bearer
token, and DIR/admin.kubeconfig, which kubectl and setpoint use as is.
Restarting with the same data directory keeps the CA, certificate, token and
data. Every request but /healthz, /readyz, /livez and /version needs
credentials: the admin token, a token of --token-auth-file, an OIDC ID token
(--oidc-issuer-url) or a client certificate the server's CA signed (setpoint
kubeconfig create writes a kubeconfig with one).
/metrics serves Prometheus metrics.

SIGTERM or SIGINT shuts the server down gracefully: it stops accepting
connections, ends watches, lets in-flight requests finish within
--shutdown-timeout, stops its background loops and closes the store, waiting at
most --store-close-timeout for it (past it, the server exits with an error and
the next start replays the store's log), then closes the audit log, waiting as
long at most (past it, the events not yet written are lost, and the server
logs how many). A second signal exits at once.`,
		Example: `  # Start a server and use it with kubectl
  setpoint server --addr 127.0.0.1:6443 --data-dir ./.data
  KUBECONFIG=./.data/admin.kubeconfig kubectl get namespaces

  # Serve with your own certificate
  setpoint server --data-dir ./.data --tls-cert-file tls.crt --tls-private-key-file tls.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			o.leaderElect.set = cmd.Flags().Changed("leader-elect")
			return runServer(ctx, stop, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:6443", "address (host:port) to serve HTTPS on; port 0 picks a free one")
	f.StringVar(&o.dataDir, "data-dir", "", "directory for the store, the security material and admin.kubeconfig (required; created if missing)")
	f.StringVar(&o.tlsCertFile, "tls-cert-file", "", "PEM serving certificate (the chain after the leaf) to use instead of a generated one; needs --tls-private-key-file")
	f.StringVar(&o.tlsKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	f.StringVar(&o.logLevel, "log-level", "info", "least severe log level written to stderr: debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.BoolVar(&o.examples, "examples", false, "also register the example kinds and plugins: apply every CustomResourceDefinition in the YAML and JSON files under --examples-dir once the server is up, then upload each example's module from bin/wasm next to --examples-dir and apply its Plugin (EXAMPLE/plugin.yaml.tmpl); example objects are left to the walkthroughs, and a missing directory or module is logged and skipped")
	f.StringVar(&o.examplesDir, "examples-dir", "examples", "where --examples looks for the example manifests")
	f.StringVar(&o.pluginCacheDir, "plugin-cache-dir", "", "directory for the plugin host's compile cache (compiled and instrumented modules, content-addressed; servers may share one); DATA-DIR/wasm-cache by default")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown waits for in-flight requests before closing their connections; the background loops (controllers, plugin calls) get what is left, at least 1s, and are then abandoned")
	f.StringSliceVar(&o.allowedOrigins, "allowed-origins", nil, "browser origins (scheme://host[:port], such as https://app.example.com), besides the server's own, that may open a WebSocket watch; repeat the flag or separate origins with commas; * is refused")
	f.Int64Var(&o.historyMinRevisions, "history-min-revisions", 10_000, "how many recent revisions background compaction keeps at least; it keeps whichever of this and --history-min-age keeps more, and a watch or continue token older than what is kept gets 410 Expired")
	f.DurationVar(&o.historyMinAge, "history-min-age", 5*time.Minute, "how much recent history, by age, background compaction keeps at least")
	f.DurationVar(&o.historyCompactionInterval, "history-compaction-interval", time.Minute, "how often background compaction looks for history to drop")
	f.DurationVar(&o.watchBookmarkInterval, "watch-bookmark-interval", engine.DefaultBookmarkInterval, "how often a watch that asked for bookmarks (allowWatchBookmarks) gets one; a watch with timeoutSeconds also gets one 2s before it ends, as from kube-apiserver")
	f.DurationVar(&o.pluginStatusInterval, "plugin-status-interval", 10*time.Second, "how often each Plugin's call and error counts are written to its status (only when they changed)")
	o.hostLimits.register(f)
	f.DurationVar(&o.moduleGCGrace, "module-gc-grace", plugins.DefaultModuleGCGrace, "how long an uploaded module that no Plugin uses (in spec.module.digest or status.loadedDigest) is kept before it is deleted; the time is counted in memory, so a restart starts it again")
	f.BoolVar(&o.profiling, "profiling", true, "serve Go's runtime profiles (heap, goroutines, CPU, trace) under /debug/pprof/ to holders of the admin token, as kube-apiserver does; go tool pprof reads them")
	o.addStoreFlags(cmd)
	o.pluginLimits.addFlags(f)
	o.addEtcdFlags(cmd)
	f.IntVar(&o.maxObjectBytes, "max-object-size", engine.DefaultMaxObjectBytes, "the largest object, in bytes as stored (JSON), that any write may store (clients, patches, apply, plugins); etcd's default request limit. Request bodies may be twice as large")
	o.limits.register(f)
	o.addLeaderElectFlags(cmd)
	o.addAuthFlags(cmd)
	o.serviceAccounts.register(f)
	o.audit.register(f)
	o.encryption.register(f)
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}

// serverURL is how clients reach ln, listening on host (as --addr gave it):
// a wildcard address is reached on loopback.
func serverURL(host string, ln net.Listener) string {
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	switch ip := net.ParseIP(host); {
	case host == "", ip != nil && ip.IsUnspecified() && ip.To4() != nil:
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	return "https://" + net.JoinHostPort(host, port)
}

// servingHosts are the names the serving certificate covers besides
// loopback: the host of --addr, or, on a wildcard address, this machine's
// name and addresses.
func servingHosts(host string) []string {
	ip := net.ParseIP(host)
	if host != "" && (ip == nil || !ip.IsUnspecified()) {
		return []string{host}
	}
	var hosts []string
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts = append(hosts, name)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLinkLocalUnicast() {
				hosts = append(hosts, ipn.IP.String())
			}
		}
	}
	return hosts
}

// watchStopper ends long-running watches (and followed Plugin logs) when
// shutdown starts, since http.Server.Shutdown waits for them otherwise.
type watchStopper struct {
	ctx  context.Context
	stop context.CancelFunc
	// detached are the WebSocket watches whose connection outlives its
	// handler; shutdown ends them besides.
	detached serving.Detached
}

func (ws *watchStopper) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info, ok := request.RequestInfoFrom(r.Context()); ok && (info.Verb == "watch" || info.Subresource == "log" && r.URL.Query().Get("follow") == "true") {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			unhook := context.AfterFunc(ws.ctx, cancel)
			defer unhook()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

func runServer(ctx context.Context, stopSignals func(), o *serverOptions, stdout, stderr io.Writer) (err error) {
	log, err := newLogger(stderr, o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	routeKlog(log)
	if o.dataDir == "" {
		return errors.New("--data-dir is required")
	}
	host, _, err := net.SplitHostPort(o.addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", o.addr, err)
	}
	if err := o.validate(); err != nil {
		return err
	}
	metrics := serving.NewMetrics()
	identity := replicaIdentity()
	if err := registerReplicaInfo(metrics.Registry(), identity, o.leaderElect.enabled); err != nil {
		return err
	}
	auditor, err := o.audit.auditor(log, metrics.Registry(), stdout)
	if err != nil {
		return err
	}
	if auditor != nil {
		// After the requests and the plugins have stopped.
		defer closeAuditor(auditor, o.storeCloseTimeout, log)
	}
	log.Info("replica", "identity", identity, "leader_elect", o.leaderElect.enabled,
		"lease_duration", o.leaderElect.leaseDuration, "renew_deadline", o.leaderElect.renewDeadline, "retry_period", o.leaderElect.retryPeriod)
	st, err := o.openStore(log, metrics.Registry())
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeStore(st, o.storeCloseTimeout); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err == nil {
			log.Info("stopped")
		}
	}()
	// The CA, serving certificate and admin token live in the store, so
	// that every server on one store has the same identity.
	material, err := serving.PrepareStored(ctx, st, serving.Options{
		DataDir:  o.dataDir,
		Hosts:    servingHosts(host),
		CertFile: o.tlsCertFile,
		KeyFile:  o.tlsKeyFile,
	})
	if err != nil {
		return err
	}
	auth, err := o.auth.build(ctx, log, material)
	if err != nil {
		return err
	}
	encryption, err := o.encryption.load(ctx, log)
	if err != nil {
		return err
	}

	api, err := newPluginAPI(ctx, pluginAPIOptions{
		store: st, log: log, dataDir: o.dataDir, cacheDir: o.pluginCacheDir, allowedOrigins: o.allowedOrigins,
		statusInterval: o.pluginStatusInterval, moduleGCGrace: o.moduleGCGrace, registerer: metrics.Registry(),
		hostLimits: o.hostLimits, pluginLimits: o.pluginLimits, maxObjectBytes: o.maxObjectBytes,
		election: o.leaderElect.options(identity), serviceAccounts: o.serviceAccounts, audit: auditor,
		clientCerts: material.ClientCertSigner(), encryption: encryption, sharedStore: o.storeEtcd.kind == "etcd",
		bookmarkInterval: o.watchBookmarkInterval, watchWriteTimeout: o.limits.watchWriteTimeout,
	})
	if err != nil {
		return fmt.Errorf("build API server: %w", err)
	}

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	connOpts := o.limits.conns()
	connOpts.Logger = log
	ln = serving.LimitConnections(ln, connOpts)
	url := serverURL(host, ln)
	kubeconfig, err := material.WriteKubeconfig(url)
	if err != nil {
		ln.Close()
		return err
	}

	watches := &watchStopper{}
	watches.ctx, watches.stop = context.WithCancel(context.Background())
	defer watches.stop()
	handler := o.handler(api, material.Token, auth, log, metrics, watches)
	tlsConfig := material.TLSConfig()
	serving.VerifyClientCerts(tlsConfig, auth.clientCAs)
	if err := o.limits.tls().Apply(tlsConfig); err != nil {
		ln.Close()
		return err
	}
	handshakeTimeout, idleTimeout := o.limits.timeouts()
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         tlsConfig,
		ConnContext:       serving.ConnContext,
		ReadHeaderTimeout: handshakeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if err := serving.ConfigureHTTP2(srv); err != nil {
		ln.Close()
		return fmt.Errorf("configure HTTP/2: %w", err)
	}

	// The API's background loops run until loopsCtx ends, after the HTTP
	// server has drained.
	loopsCtx, stopLoops := context.WithCancel(context.Background())
	defer stopLoops()
	var wg sync.WaitGroup
	loopsErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		loopsErr <- api.Run(loopsCtx)
	}()
	// No request before the built-in kinds are served: a client would
	// get 404 for Leases or Plugins. Connections wait in the listen queue.
	select {
	case <-api.kindsServed:
	case <-ctx.Done():
	case e := <-loopsErr:
		loopsErr <- e // ends the server below
	}
	serveErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		serveErr <- srv.ServeTLS(ln, "", "")
	}()

	log.Info("serving", "url", url, "kubeconfig", kubeconfig, "data_dir", o.dataDir)
	fmt.Fprintf(stdout, "Setpoint is serving at %s\nAdmin kubeconfig: %s\n  export KUBECONFIG=%s\n  kubectl get namespaces\n",
		url, kubeconfig, shellQuote(kubeconfig))
	if o.examples {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loadExamples(loopsCtx, log, stdout, o.examplesDir, url, kubeconfig, material)
		}()
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case e := <-serveErr:
		runErr = fmt.Errorf("serve: %w", e)
		serveErr <- nil
	case e := <-loopsErr:
		if e == nil {
			e = errors.New("stopped unexpectedly")
		}
		runErr = fmt.Errorf("API background loops: %w", e)
		loopsErr <- nil
	}
	if runErr != nil {
		// Said now: draining may take up to the shutdown timeout.
		log.Error("shutting down", "err", runErr)
	}
	// A second signal kills the process the default way.
	stopSignals()

	watches.stop()
	drainCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	_ = watches.detached.Shutdown(drainCtx)
	if err := srv.Shutdown(drainCtx); err != nil {
		log.Warn("requests still running at the shutdown deadline; closing their connections", "err", err)
		_ = srv.Close()
	}
	stopLoops()
	deadline, _ := drainCtx.Deadline()
	stopped := waitLoops(&wg, deadline, log)
	if e := <-serveErr; e != nil && !errors.Is(e, http.ErrServerClosed) && runErr == nil {
		runErr = fmt.Errorf("serve: %w", e)
	}
	if !stopped {
		return runErr
	}
	if e := <-loopsErr; e != nil && !errors.Is(e, context.Canceled) && runErr == nil {
		runErr = fmt.Errorf("API background loops: %w", e)
	}
	return runErr
}

// handler puts the serving layers around api: request info, panic recovery,
// metrics and the request log; authentication with token and auth (none
// besides the token when nil); impersonation; the in-flight
// limits and timeouts; /metrics and the profiles. Every request, the module
// upload's included, passes through them to the API server's router. watches
// ends long-running requests when shutdown starts.
func (o *serverOptions) handler(api *pluginAPI, token string, auth *serverAuth, log *slog.Logger, metrics *serving.Metrics, watches *watchStopper) http.Handler {
	if auth == nil {
		auth = &serverAuth{}
	}
	return serving.NewHandler(serving.HandlerOptions{
		API:        watches.wrap(api),
		Token:      token,
		Authorizer: api.authz,
		// ServiceAccount tokens, then the token file and OIDC, checked
		// when the admin token does not match.
		Authenticators: append([]authenticator.Token{api.tokens.auth}, auth.tokens...),
		ClientCAs:      auth.clientCAs,
		Logger:         log,
		Metrics:        metrics,
		Profiling:      o.profiling,
		// The web UI's static files hold no secrets; a browser loads them
		// first and then signs in with the token.
		PublicPaths: []string{"/ui"},
		Limits:      o.limits.requests(o.hostLimits),
		Served:      servedResources(api.svc),
		Audit:       api.audit,
		Detached:    &watches.detached,
	})
}

// validate checks the flags runServer does not check elsewhere, before
// anything is created.
func (o *serverOptions) validate() error {
	for _, origin := range o.allowedOrigins {
		if strings.Contains(origin, "*") {
			return fmt.Errorf("--allowed-origins %q: wildcards are refused; list each origin, such as https://app.example.com", origin)
		}
		if err := wswatch.CheckOrigin(origin); err != nil {
			return fmt.Errorf("--allowed-origins %q: want scheme://host[:port] with scheme http or https and nothing after the host, such as https://app.example.com", origin)
		}
	}
	if o.historyMinRevisions < 1 {
		return fmt.Errorf("--history-min-revisions %d: want 1 or more", o.historyMinRevisions)
	}
	if o.historyMinAge <= 0 {
		return fmt.Errorf("--history-min-age %v: want a positive duration", o.historyMinAge)
	}
	if o.historyCompactionInterval <= 0 {
		return fmt.Errorf("--history-compaction-interval %v: want a positive duration", o.historyCompactionInterval)
	}
	if o.storeCloseTimeout <= 0 {
		return fmt.Errorf("--store-close-timeout %v: want a positive duration", o.storeCloseTimeout)
	}
	if o.watchBookmarkInterval <= 0 {
		return fmt.Errorf("--watch-bookmark-interval %v: want a positive duration", o.watchBookmarkInterval)
	}
	if o.pluginStatusInterval <= 0 {
		return fmt.Errorf("--plugin-status-interval %v: want a positive duration", o.pluginStatusInterval)
	}
	if o.moduleGCGrace <= 0 {
		return fmt.Errorf("--module-gc-grace %v: want a positive duration", o.moduleGCGrace)
	}
	if err := o.pluginLimits.validate(); err != nil {
		return err
	}
	if err := o.resolveLeaderElect(); err != nil {
		return err
	}
	if err := o.auth.validate(); err != nil {
		return err
	}
	if err := o.serviceAccounts.validate(); err != nil {
		return err
	}
	if err := o.audit.validate(); err != nil {
		return err
	}
	return o.limits.validate()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
