package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/apiserver"
	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/engine/auth/rbac"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/election"
	"github.com/setpoint-dev/setpoint/engine/gc"
	"github.com/setpoint-dev/setpoint/engine/plugins"
	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/encrypt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// hostAdapter is the Wasm host as the plugin manager sees it.
type hostAdapter struct {
	h   *host.Host
	reg *host.Registry
	// checked keeps the version the last upload's check loaded, so that the
	// Plugin that names the module right after is served by it instead of
	// a second load.
	checked *checkedVersion
}

// checkedKeep is how long a checked version waits for its Plugin.
const checkedKeep = 2 * time.Minute

// checkedVersion holds at most one version loaded by Check, until the
// Plugin that names its module takes it, a newer one replaces it, it has
// waited checkedKeep (run drops it within a quarter of that more), or run
// stops. The pluginAPI owns it: Run runs run, and waits for it, before it
// closes the host.
type checkedVersion struct {
	// now is the clock; time.Now when nil.
	now func() time.Time

	mu     sync.Mutex // guards the fields below
	p      *host.Plugin
	until  time.Time // when p is dropped
	closed bool      // run has stopped: keep closes what it is given
}

func (c *checkedVersion) clock() time.Time {
	if c.now == nil {
		return time.Now()
	}
	return c.now()
}

// keep holds p, closing the version held before.
func (c *checkedVersion) keep(p *host.Plugin) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = p.Close()
		return
	}
	c.dropLocked()
	c.p, c.until = p, c.clock().Add(checkedKeep)
}

// take hands over the held version if it is of the module with digest.
func (c *checkedVersion) take(digest string) *host.Plugin {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p == nil || c.p.Digest() != digest {
		return nil
	}
	p := c.p
	c.p = nil
	return p
}

// expire drops the held version once it has waited checkedKeep.
func (c *checkedVersion) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p != nil && !c.clock().Before(c.until) {
		c.dropLocked()
	}
}

// run drops the held version when it expires, until ctx is done; then it
// drops it, and keep closes what it gets from then on.
func (c *checkedVersion) run(ctx context.Context) error {
	t := time.NewTicker(checkedKeep / 4)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.expire()
		case <-ctx.Done():
			c.mu.Lock()
			defer c.mu.Unlock()
			c.closed = true
			c.dropLocked()
			return nil
		}
	}
}

func (c *checkedVersion) dropLocked() {
	if c.p != nil {
		_ = c.p.Close()
		c.p = nil
	}
}

var _ plugins.Host = hostAdapter{}

func hostConfig(cfg plugins.Config) host.Config {
	return host.Config{
		Permissions: host.Permissions{Read: cfg.Read, Write: cfg.Write, Events: cfg.Events},
		Limits:      host.Limits{CallTimeout: cfg.CallTimeout, MemoryPages: cfg.MemoryPages, PoolSize: cfg.PoolSize},
		Egress:      (*host.Egress)(cfg.Egress),
	}
}

// Check loads the module as a version of no plugin yet: it compiles
// (filling the on-disk cache), checks and instantiates it once. The version
// is kept (see checkedVersion), so that the Plugin created right after the upload
// is served by it (see Stage) rather than by a second load.
func (a hostAdapter) Check(ctx context.Context, wasm []byte, digest string, cfg plugins.Config) error {
	p, err := a.h.LoadDigest(ctx, "upload", wasm, digest, hostConfig(cfg))
	if err != nil {
		// The module has no plugin name yet: say what is wrong, not whose.
		var me *host.ModuleError
		if errors.As(err, &me) {
			return fmt.Errorf("%w: %s", me.Err, me.Detail)
		}
		return err
	}
	if a.checked == nil {
		return p.Close()
	}
	a.checked.keep(p)
	return nil
}

// Install serves the plugin name with wasm at once: Stage, then Commit.
func (a hostAdapter) Install(ctx context.Context, name string, wasm []byte, digest string, cfg plugins.Config) (plugins.Exports, error) {
	c, err := a.Stage(ctx, name, wasm, digest, cfg)
	if err != nil {
		return plugins.Exports{}, err
	}
	ex := c.Exports()
	return ex, c.Commit()
}

func exportsOf(p *host.Plugin) plugins.Exports {
	pre := p.Preemption()
	if why := p.PreemptionReason(); why != "" {
		pre += " (" + why + ")"
	}
	ex := plugins.Exports{Reconcile: p.HasReconcile(), Admit: p.HasAdmit(), Finalize: p.HasFinalize(), Preemption: pre}
	if p.Tier() == host.TierInterpreter {
		ex.Tier = p
	}
	return ex
}

func (a hostAdapter) Remove(name string) { a.reg.Remove(name) }

func (a hostAdapter) Caller(name string) plugins.Caller { return a.reg.Handle(name) }

// ForgetModule drops the host's cached instrumented form of a deleted
// module.
func (a hostAdapter) ForgetModule(digest string) { a.h.ForgetModule(digest) }

var _ plugins.ModuleForgetter = hostAdapter{}

// pluginAPI is the server's object layer with plugins live in it: the
// engine, the garbage collector beside it, the plugin manager as its
// admission chain, the controllers of reconcile bindings, and the
// Kubernetes-compatible API over the engine with the module upload, the
// Plugins' log subresource and the snapshot endpoint on the API's router.
//
// newPluginAPI is where these parts are built and given to one another;
// Run runs their loops and owns them until they stopped.
type pluginAPI struct {
	http.Handler // the API server
	svc          *engine.Service
	gc           *gc.Collector
	host         *host.Host
	registry     *host.Registry
	checked      *checkedVersion
	manager      *plugins.Manager
	ctrls        *controller.Manager
	log          *slog.Logger
	// authz decides requests by RBAC; Run fills its cache.
	authz *rbac.Authorizer
	// rbacDefaults is set once the first write of the default roles and
	// bindings has ended: written, or refused for now by the store (then
	// retried while the server serves without them); /readyz fails before,
	// as kube-apiserver's bootstrap-roles hook does, so that a client that
	// waited for it finds the defaults.
	rbacDefaults atomic.Bool
	// leases elect the controllers, the garbage collector and the writer
	// of the Plugins' call counters; nil when this server runs them all.
	leases *election.Leases
	// reportsCounters is set while this replica writes the Plugins' call
	// counters (it holds pluginStatusLease, or runs alone).
	reportsCounters atomic.Bool
	// finalizesPlugins is set while this replica removes the finalizer of
	// deleted Plugins (it holds pluginFinalizeLease, or runs alone).
	finalizesPlugins atomic.Bool
	// tokens verify and issue ServiceAccount tokens.
	tokens *serviceAccountTokens
	// audit records the API's requests and the plugins' writes; nil when
	// auditing is off.
	audit *serving.Auditor
	// kindsServed is closed once Run serves the built-in kinds (Leases,
	// Plugins); the server accepts no request before.
	kindsServed chan struct{}
}

// pluginAPIOptions configures newPluginAPI. Zero values get defaults.
type pluginAPIOptions struct {
	// store holds the objects and the modules; required.
	store store.Store
	// log receives the parts' logs, each with its component; slog.Default()
	// when nil.
	log *slog.Logger
	// dataDir holds the Wasm host's compile cache (dataDir/wasm-cache)
	// unless cacheDir names another; required.
	dataDir  string
	cacheDir string
	// allowedOrigins are the browser origins, besides the server's own,
	// that may open WebSocket watches.
	allowedOrigins []string
	// statusInterval is how often a Plugin's call counters reach its
	// status; moduleGCGrace how long a module no Plugin uses is kept. The
	// plugin manager's defaults when zero.
	statusInterval, moduleGCGrace time.Duration
	// registerer gets every part's metrics; a registry of their own when
	// nil.
	registerer prometheus.Registerer
	// hostLimits bound the Wasm host; pluginLimits each plugin's log and
	// writes.
	hostLimits   hostLimits
	pluginLimits pluginLimitOptions
	// watchWriteTimeout bounds each write of a followed Plugin log, as of
	// a watch's event (serving.DefaultWatchWriteTimeout when zero).
	watchWriteTimeout time.Duration
	// maxObjectBytes bounds every stored object
	// (engine.DefaultMaxObjectBytes when zero).
	maxObjectBytes int
	// election, when set, elects each plugin's reconcile controller, the
	// garbage collector and the writer of the Plugins' call counters over
	// Leases, so that each runs on one replica at a time; when nil, this
	// server runs them all.
	election *electionOptions
	// bookmarkInterval is how often a watch gets a bookmark
	// (engine.Options.BookmarkInterval).
	bookmarkInterval time.Duration
	// sharedStore is set when other servers may write to the store
	// (--store etcd): see engine.Options.SharedStore.
	sharedStore bool
	// clientCerts signs client certificates at
	// serving.ClientCertificatesPath; nil on a server without a CA of its
	// own, which answers there that it cannot.
	clientCerts *serving.ClientCertSigner
	// serviceAccounts configures ServiceAccount tokens.
	serviceAccounts serviceAccountFlags
	// audit, when set, records the plugins' writes; the server's handler
	// records the requests with it too.
	audit *serving.Auditor
	// encryption, when set, encrypts the resources it lists in the store
	// the engine and the garbage collector use (store/encrypt).
	encryption *encrypt.Config
}

// newPluginAPI builds the parts of the server's object layer and wires them
// together, in the order they need one another: the admission chain first,
// so that the engine has it from the start; the engine on the store; the
// Wasm host, whose object and event calls go to the engine; the plugin
// manager, which keeps the admission chain in step with the Plugins; the
// API server over the engine, with the module upload, the Plugins' log and
// the snapshot endpoint on its router. Nothing runs until Run.
func newPluginAPI(ctx context.Context, o pluginAPIOptions) (*pluginAPI, error) {
	if o.store == nil || o.dataDir == "" {
		return nil, errors.New("newPluginAPI: store and dataDir are required")
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.registerer == nil {
		o.registerer = prometheus.NewRegistry()
	}
	log, promReg := o.log, o.registerer
	admitter := plugins.NewAdmitter(log.With("component", "plugins"))
	authz := rbac.New(rbac.Options{Logger: log.With("component", "rbac")})
	// RBAC's escalation checks come first: a write that grants what its
	// writer does not hold goes no further.
	chain := admissionChain{rbac.NewEscalation(authz), admitter}
	// No one installs a Plugin with permissions they do not hold.
	admitter.CheckInstallers(authz)
	objStore := o.store
	if o.encryption != nil {
		objStore = encrypt.New(o.store, o.encryption)
	}
	var writeAudit engine.WriteAuditor // a nil *serving.Auditor must stay a nil interface
	if o.audit != nil {
		writeAudit = o.audit
	}
	svc, err := engine.New(ctx, engine.Options{Store: objStore, Logger: log.With("component", "apiserver"), MaxObjectBytes: o.maxObjectBytes, Admitter: chain, SharedStore: o.sharedStore,
		BookmarkInterval: o.bookmarkInterval, Auditor: writeAudit})
	if err != nil {
		return nil, err
	}
	collector, err := gc.New(svc, gc.Options{Store: objStore, Logger: log.With("component", "gc")})
	if err != nil {
		return nil, err
	}
	objects := plugins.NewObjects(svc, log.With("component", "plugins"))
	logs, err := plugins.NewLogs(o.pluginLimits.logOptions(), promReg)
	if err != nil {
		return nil, err
	}
	writes, err := plugins.NewWriteLimiter(o.pluginLimits.writeLimits(), promReg)
	if err != nil {
		return nil, err
	}
	quota, err := plugins.NewObjectQuota(svc, o.pluginLimits.maxObjects, promReg)
	if err != nil {
		return nil, err
	}
	writes.LimitObjects(quota)
	objects.LimitWrites(writes)
	// A plugin reads and writes through the authorizer, as its own user.
	objects.Authorize(authz)
	var pluginAudit plugins.Auditor // a nil *serving.Auditor must stay a nil interface
	if o.audit != nil {
		pluginAudit = o.audit
		objects.AuditWrites(pluginAudit)
	}
	egress, err := plugins.NewEgressMetrics(promReg)
	if err != nil {
		return nil, err
	}
	cacheDir := o.cacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(o.dataDir, "wasm-cache")
	}
	hopts := host.Options{
		CacheDir: cacheDir,
		// The plugins' log lines go to their Plugin's log (the log
		// subresource), and only those the rate limit keeps to the server's.
		Logger:  slog.New(logs.Handler(log.With("component", "host").Handler())),
		Objects: objects,
		Events:  objects,
	}
	if egress != nil { // a nil *EgressMetrics must stay a nil interface
		hopts.Egress = egress
	}
	if err := o.hostLimits.apply(&hopts); err != nil {
		return nil, err
	}
	h, err := host.New(hopts)
	if err != nil {
		return nil, fmt.Errorf("wasm host: %w", err)
	}
	if err := registerTierMetrics(promReg, h); err != nil {
		_ = h.Close()
		return nil, err
	}
	reg := host.NewRegistry(h)
	checked := &checkedVersion{}
	adapter := hostAdapter{h: h, reg: reg, checked: checked}
	// A store an earlier version wrote may hold modules where modules no
	// longer live; they move before anything reads one.
	if n, err := plugins.MigrateModules(ctx, o.store); err != nil {
		_ = h.Close()
		return nil, err
	} else if n > 0 {
		log.Info("moved modules to their current keys", "modules", n)
	}
	modules := plugins.NewModules(o.store)
	ctrlMetrics, err := controller.NewMetrics(promReg)
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	p := &pluginAPI{svc: svc, gc: collector, host: h, registry: reg, checked: checked, log: log, authz: authz, audit: o.audit, kindsServed: make(chan struct{})}
	ctrlOpts := controller.ManagerOptions{Metrics: ctrlMetrics, Logger: log.With("component", "controllers")}
	if e := o.election; e != nil {
		p.leases, err = election.New(election.Options{
			Client: svc, Identity: e.identity,
			LeaseDuration: e.leaseDuration, RenewDeadline: e.renewDeadline, RetryPeriod: e.retryPeriod,
			Logger: log.With("component", "election"), Registerer: promReg,
		})
		if err != nil {
			_ = h.Close()
			return nil, err
		}
		ctrlOpts.Electors = func(name string) controller.Elector { return p.leases.Elector(pluginLeasePrefix + name) }
	} else {
		p.reportsCounters.Store(true)
		p.finalizesPlugins.Store(true)
	}
	ctrls := controller.NewManager(ctrlOpts)
	mgr, err := plugins.New(plugins.Options{
		Service: svc, Modules: modules, Host: adapter, Controllers: ctrls,
		Metrics: ctrlMetrics, Registerer: promReg,
		StatusInterval: o.statusInterval, ModuleGCGrace: o.moduleGCGrace, Logger: log.With("component", "plugins"),
		Writes: writes, Logs: logs, Egress: egress, Admitter: admitter, ReportsCounters: p.reportsCounters.Load,
		Audit: pluginAudit, Authorizer: authz,
		ModuleGCApart: true, Finalizes: p.finalizesPlugins.Load,
	})
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	tokens, err := newServiceAccountTokens(ctx, o.store, svc, o.serviceAccounts, log.With("component", "serviceaccounts"))
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	p.tokens = tokens
	upload := plugins.NewUploadHandler(plugins.UploadOptions{
		Modules: modules, Host: adapter, GC: mgr.ModuleGC(), Logger: log.With("component", "modules"),
	})
	api, err := apiserver.New(apiserver.Options{
		Engine: svc, Logger: log.With("component", "apiserver"), AllowedOrigins: o.allowedOrigins, Registerer: promReg,
		Authorizer: authz,
		ReadyChecks: []apiserver.HealthCheck{{Name: "poststarthook/rbac/bootstrap-roles", Check: func(context.Context) error {
			if !p.rbacDefaults.Load() {
				return errors.New("default RBAC roles and bindings not tried yet")
			}
			return nil
		}}},
		Routes: append([]apiserver.Route{
			{Pattern: plugins.ModulesPath, Handler: upload},
			{Pattern: plugins.ModulesPath + "/*", Handler: upload},
			{Pattern: plugins.PluginsPath + "/{name}/log", Handler: plugins.NewLogHandler(logs, svc, cmp.Or(o.watchWriteTimeout, serving.DefaultWatchWriteTimeout))},
			{Pattern: snapshotPath, Handler: snapshotHandler{st: o.store, log: log.With("component", "snapshot")}},
			{Pattern: serving.ClientCertificatesPath, Handler: clientCertHandler(o.clientCerts)},
			{Pattern: apiserver.TokenRequestPattern, Handler: tokens.handler},
		}, tokens.discoveryRoutes()...),
	})
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	p.Handler, p.manager, p.ctrls = api, mgr, ctrls
	return p, nil
}

// Run runs the engine's loops, serves the built-in kinds (Leases, Plugins;
// then closes kindsServed), and runs the garbage
// collector, the plugin manager, the controllers and the expiry of the
// checked version until ctx is done, and waits for each of them to stop;
// then it closes the engine (its delayed writes end before the store is
// closed), every plugin version and the host. A part that fails stops the
// others. With leader election, the garbage collector and each plugin's
// controller run only while this replica leads their Lease, and the leases
// are released once the work they guard has stopped, before the engine's
// loops stop, so that another replica takes over at once.
func (p *pluginAPI) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The engine's loops outlive the other parts, whose last writes (the
	// leases' release) go through the engine.
	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	engineErr := make(chan error, 1)
	go func() {
		err := p.svc.Run(engineCtx)
		if err != nil && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("engine loops: %w", err)
		} else if engineCtx.Err() == nil {
			err = errors.New("engine loops stopped unexpectedly")
		} else {
			err = nil
		}
		if err != nil {
			cancel(err)
		}
		engineErr <- err
	}()
	// Every server serves Leases, those of leader election among them, and
	// Plugins before its first request (kindsServed).
	if err := election.EnsureKind(ctx, p.svc); err != nil && ctx.Err() == nil {
		cancel(fmt.Errorf("serve Leases: %w", err))
	} else if err := plugins.EnsureKind(ctx, p.svc); err != nil && ctx.Err() == nil {
		cancel(fmt.Errorf("serve Plugins: %w", err))
	} else if ctx.Err() == nil {
		close(p.kindsServed)
	}
	var wg sync.WaitGroup
	parts := []struct {
		name string
		run  func(context.Context) error
	}{
		{"garbage collector", p.runGC},
		{"plugin manager", p.manager.Run},
		{"controllers", p.ctrls.Run},
		{"checked versions", p.checked.run},
		{"plugin status", p.runCountersReport},
		{"module garbage collector", p.runModuleGC},
		{"plugin finalization", p.runPluginFinalization},
		{"rbac", p.runRBAC},
		{"serviceaccount cache", p.tokens.cache.Run},
	}
	errs := make([]error, len(parts))
	for i, part := range parts {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := part.run(ctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				errs[i] = fmt.Errorf("%s: %w", part.name, err)
				cancel(errs[i])
			} else if ctx.Err() == nil {
				errs[i] = fmt.Errorf("%s stopped unexpectedly", part.name)
				cancel(errs[i])
			}
		}()
	}
	wg.Wait()
	if p.leases != nil {
		// Each release follows the stop of the work it guards.
		p.leases.Wait()
	}
	stopEngine()
	<-engineErr
	// Nothing writes through the engine any more: end its delayed writes,
	// which would otherwise reach a store closed after Run returns.
	if err := p.svc.Close(); err != nil {
		p.log.Warn("close engine", "err", err)
	}
	// The controllers and the manager have stopped: no call can start.
	_ = p.registry.Close()
	if err := p.host.Close(); err != nil {
		p.log.Warn("close wasm host", "err", err)
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// gcStartWait bounds how long the garbage collector waits at start for the
// stored plugins.
const gcStartWait = 10 * time.Second

// runGC runs the garbage collector: while this replica leads its Lease,
// with leader election. It starts once the stored Plugins have been
// reconciled (or after gcStartWait): its first list reads every stored
// object, which on a large store would take the cores the plugins load on
// at a restart, and nothing it collects is that urgent.
func (p *pluginAPI) runGC(ctx context.Context) error {
	wait := time.NewTimer(gcStartWait)
	defer wait.Stop()
	select {
	case <-p.manager.Started():
	case <-wait.C:
	case <-ctx.Done():
		return nil
	}
	if p.leases == nil {
		return p.gc.Run(ctx)
	}
	return election.Run(ctx, p.log.With("component", "gc"), p.leases.Elector(gcLease), p.gc.Run)
}

// runCountersReport sets reportsCounters while this replica leads
// pluginStatusLease, with leader election; without, it is always set.
func (p *pluginAPI) runCountersReport(ctx context.Context) error {
	return p.runFlag(ctx, pluginStatusLease, &p.reportsCounters)
}

// runPluginFinalization sets finalizesPlugins while this replica leads
// pluginFinalizeLease, with leader election; without, it is always set.
func (p *pluginAPI) runPluginFinalization(ctx context.Context) error {
	return p.runFlag(ctx, pluginFinalizeLease, &p.finalizesPlugins)
}

// runFlag sets flag while this replica leads lease, with leader election;
// without, the flag stays as newPluginAPI set it, and runFlag waits for
// ctx.
func (p *pluginAPI) runFlag(ctx context.Context, lease string, flag *atomic.Bool) error {
	if p.leases == nil {
		<-ctx.Done()
		return nil
	}
	return election.Run(ctx, p.log.With("component", "plugins"), p.leases.Elector(lease), func(ctx context.Context) error {
		flag.Store(true)
		defer flag.Store(false)
		<-ctx.Done()
		return nil
	})
}

// runModuleGC runs the garbage collector of modules: while this replica
// leads its Lease, with leader election. Its grace periods are counted in
// the leader's memory, so a new leader counts them again from its first
// pass: a takeover delays deletions and never hastens one.
func (p *pluginAPI) runModuleGC(ctx context.Context) error {
	gc := p.manager.ModuleGC()
	if p.leases == nil {
		return gc.Run(ctx)
	}
	return election.Run(ctx, p.log.With("component", "modules"), p.leases.Elector(moduleGCLease), gc.Run)
}

// runRBAC ensures the default roles and bindings, then fills the
// authorizer's cache and aggregates ClusterRoles until ctx is done. The
// authorizer decides nothing until its cache holds every RBAC object, the
// defaults included: requests that need a decision wait until then. The
// defaults' writes pass admission, which holds writes until the plugin
// manager has loaded the stored Plugins.
//
// /readyz fails until the first write of the defaults has ended. A store
// that refuses the defaults' writes for now (disk nearly full, etcd away, a
// write past its deadline) does not end the server nor keep it unready: the
// authorizer starts without them (deny by default) and the writes are
// retried until they land.
func (p *pluginAPI) runRBAC(ctx context.Context) error {
	ctx = engine.WithSystemUser(ctx, rbacUser)
	err := rbac.EnsureDefaults(ctx, p.svc)
	if err == nil || ctx.Err() != nil {
		p.rbacDefaults.Store(err == nil)
		return p.authz.Run(ctx, p.svc)
	}
	if !storeRefusesForNow(err) {
		return err
	}
	p.rbacDefaults.Store(true)
	p.log.Warn("default RBAC roles not written yet; retrying while the store refuses writes", "err", err)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		if err := retryWhileRefused(ctx, defaultsRetry, func(ctx context.Context) error {
			return rbac.EnsureDefaults(ctx, p.svc)
		}); err != nil && ctx.Err() == nil {
			p.log.Error("default RBAC roles not written", "err", err)
			return
		}
		if ctx.Err() == nil {
			p.log.Info("default RBAC roles written")
		}
	})
	return p.authz.Run(ctx, p.svc)
}

// defaultsRetry is how often runRBAC retries the defaults.
const defaultsRetry = time.Second

// retryWhileRefused runs f every interval until it succeeds, fails for
// another reason than a store refusing writes for now, or ctx ends.
func retryWhileRefused(ctx context.Context, interval time.Duration, f func(context.Context) error) error {
	return wait.PollUntilContextCancel(ctx, interval, false, func(ctx context.Context) (bool, error) {
		err := f(ctx)
		if err != nil && storeRefusesForNow(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// storeRefusesForNow tells whether err is the store refusing a write for a
// reason that passes by itself: 507 (disk nearly full), 503 (store
// unavailable) or 504 (a write past its deadline), as the engine answers
// them, or the store's own errors.
func storeRefusesForNow(err error) bool {
	if errors.Is(err, store.ErrNoSpace) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrWriteTimedOut) {
		return true
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	switch status.Status().Code {
	case http.StatusInsufficientStorage, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}
