package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/setpoint-dev/setpoint/engine/apiserver"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/gc"
	"github.com/setpoint-dev/setpoint/engine/plugins"
	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/store"
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

// checkedVersion holds at most one version loaded by Check, closing it when
// a newer one arrives or checkedKeep passes.
type checkedVersion struct {
	mu    sync.Mutex
	p     *host.Plugin
	timer *time.Timer
}

// keep holds p, closing the version held before.
func (c *checkedVersion) keep(p *host.Plugin) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked()
	c.p = p
	c.timer = time.AfterFunc(checkedKeep, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.p == p {
			c.dropLocked()
		}
	})
}

// take hands over the held version if it is of the module wasm. It hashes
// wasm only when a version is held: most installs (every Plugin at start-up)
// find none.
func (c *checkedVersion) take(wasm []byte) *host.Plugin {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p == nil || c.p.Digest() != host.Digest(wasm) {
		return nil
	}
	p := c.p
	c.timer.Stop()
	c.p, c.timer = nil, nil
	return p
}

func (c *checkedVersion) dropLocked() {
	if c.p != nil {
		c.timer.Stop()
		_ = c.p.Close()
		c.p, c.timer = nil, nil
	}
}

var _ plugins.Host = hostAdapter{}

func hostConfig(cfg plugins.Config) host.Config {
	return host.Config{
		Permissions: host.Permissions{Read: cfg.Read, Write: cfg.Write, Events: cfg.Events},
		Limits:      host.Limits{CallTimeout: cfg.CallTimeout, MemoryPages: cfg.MemoryPages, PoolSize: cfg.PoolSize},
	}
}

// Check loads the module as a version of no plugin yet: it compiles
// (filling the on-disk cache), checks and instantiates it once. The version
// is kept for checkedKeep, so that the Plugin created right after the upload
// is served by it (see Stage) rather than by a second load.
func (a hostAdapter) Check(ctx context.Context, wasm []byte, cfg plugins.Config) error {
	p, err := a.h.Load(ctx, "upload", wasm, hostConfig(cfg))
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
func (a hostAdapter) Install(ctx context.Context, name string, wasm []byte, cfg plugins.Config) (plugins.Exports, error) {
	c, err := a.Stage(ctx, name, wasm, cfg)
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
	return plugins.Exports{Reconcile: p.HasReconcile(), Admit: p.HasAdmit(), Finalize: p.HasFinalize(), Preemption: pre}
}

func (a hostAdapter) Remove(name string) { a.reg.Remove(name) }

func (a hostAdapter) Caller(name string) plugins.Caller { return a.reg.Handle(name) }

// ForgetModule drops the host's cached instrumented form of a deleted
// module.
func (a hostAdapter) ForgetModule(digest string) { a.h.ForgetModule(digest) }

var _ plugins.ModuleForgetter = hostAdapter{}

// pluginAPI is the API with plugins live in it: the module upload endpoint
// in front of the Kubernetes-compatible API, and the garbage collector, the
// plugin manager and the controllers of reconcile bindings running with the
// API's loops.
type pluginAPI struct {
	api      *apiserver.Server
	gc       *gc.Collector
	upload   http.Handler
	logs     http.Handler // the Plugins' log subresource
	snapshot http.Handler // snapshotPath
	host     *host.Host
	registry *host.Registry
	manager  *plugins.Manager
	ctrls    *controller.Manager
	log      *slog.Logger
}

// newPluginAPI builds the API over st with the Wasm host (its compile cache
// in dataDir/wasm-cache), the module store, the plugin manager as the
// admission chain, and the controller manager. Browsers on allowedOrigins
// may open WebSocket watches besides the server's own origin; a Plugin's
// call counters reach its status every statusInterval; a module no Plugin
// uses is deleted after moduleGCGrace. hlimits bound the Wasm host, limits
// each plugin's log and writes; maxObjectBytes bounds every stored object.
func newPluginAPI(st store.Store, log *slog.Logger, dataDir string, allowedOrigins []string, statusInterval, moduleGCGrace time.Duration, promReg prometheus.Registerer, hlimits hostLimits, limits pluginLimitOptions, maxObjectBytes int) (apiHandler, error) {
	api, err := apiserver.New(apiserver.Options{Store: st, Logger: log.With("component", "apiserver"), AllowedOrigins: allowedOrigins, MaxObjectBytes: maxObjectBytes, Registerer: promReg})
	if err != nil {
		return nil, err
	}
	svc := api.Engine()
	collector, err := gc.New(svc, gc.Options{Store: st, Logger: log.With("component", "gc")})
	if err != nil {
		return nil, err
	}
	objects := plugins.NewObjects(svc, log.With("component", "plugins"))
	logs, err := plugins.NewLogs(limits.logOptions(), promReg)
	if err != nil {
		return nil, err
	}
	writes, err := plugins.NewWriteLimiter(limits.writeLimits(), promReg)
	if err != nil {
		return nil, err
	}
	quota, err := plugins.NewObjectQuota(svc, limits.maxObjects, promReg)
	if err != nil {
		return nil, err
	}
	writes.LimitObjects(quota)
	objects.LimitWrites(writes)
	hopts := host.Options{
		CacheDir: filepath.Join(dataDir, "wasm-cache"),
		// The plugins' log lines go to their Plugin's log (the log
		// subresource), and only those the rate limit keeps to the server's.
		Logger:  slog.New(logs.Handler(log.With("component", "host").Handler())),
		Objects: objects,
		Events:  objects,
	}
	if err := hlimits.apply(&hopts); err != nil {
		return nil, err
	}
	h, err := host.New(hopts)
	if err != nil {
		return nil, fmt.Errorf("wasm host: %w", err)
	}
	reg := host.NewRegistry(h)
	adapter := hostAdapter{h: h, reg: reg, checked: &checkedVersion{}}
	modules := plugins.NewModules(st)
	ctrlMetrics, err := controller.NewMetrics(promReg)
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	ctrls := controller.NewManager(controller.ManagerOptions{Metrics: ctrlMetrics, Logger: log.With("component", "controllers")})
	mgr, err := plugins.New(plugins.Options{
		Service: svc, Modules: modules, Host: adapter, Controllers: ctrls,
		Metrics: ctrlMetrics, Registerer: promReg,
		StatusInterval: statusInterval, ModuleGCGrace: moduleGCGrace, Logger: log.With("component", "plugins"),
		Writes: writes, Logs: logs,
	})
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	svc.SetAdmitter(mgr.Admitter())
	return &pluginAPI{
		api: api,
		gc:  collector,
		upload: plugins.NewUploadHandler(plugins.UploadOptions{
			Modules: modules, Host: adapter, GC: mgr.ModuleGC(), Logger: log.With("component", "modules"),
		}),
		logs:     plugins.NewLogHandler(logs, svc),
		snapshot: snapshotHandler{st: st, log: log.With("component", "snapshot")},
		host:     h, registry: reg, manager: mgr, ctrls: ctrls, log: log,
	}, nil
}

func (p *pluginAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == plugins.ModulesPath || strings.HasPrefix(r.URL.Path, plugins.ModulesPath+"/") {
		p.upload.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == snapshotPath {
		p.snapshot.ServeHTTP(w, r)
		return
	}
	if _, ok := plugins.LogPluginName(r.URL.Path); ok {
		p.logs.ServeHTTP(w, r)
		return
	}
	p.api.ServeHTTP(w, r)
}

// Run runs the API's loops, the garbage collector, the plugin manager and
// the controllers until ctx is done, then closes every plugin version and the
// host. A part that fails stops the others.
func (p *pluginAPI) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	parts := []struct {
		name string
		run  func(context.Context) error
	}{
		{"API loops", p.api.Run},
		{"garbage collector", p.gc.Run},
		{"plugin manager", p.manager.Run},
		{"controllers", p.ctrls.Run},
	}
	errs := make([]error, len(parts))
	for i, part := range parts {
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
