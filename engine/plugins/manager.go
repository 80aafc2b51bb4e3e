package plugins

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/workqueue"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Phases of a Plugin.
const (
	PhasePending = "Pending"
	PhaseLoaded  = "Loaded"
	PhaseFailed  = "Failed"
)

// ConditionLoaded says whether the module named by the spec serves calls.
const ConditionLoaded = "Loaded"

// Reasons of the Loaded condition.
const (
	ReasonLoaded         = "Loaded"
	ReasonInvalidSpec    = "InvalidSpec"
	ReasonModuleNotFound = "ModuleNotFound"
	ReasonInvalidModule  = "InvalidModule"
	ReasonMissingExport  = "MissingExport"
	ReasonNotServed      = "ResourceNotServed"
	// ReasonReconcileConflict: another Plugin, created first, reconciles
	// the kind spec.reconcile.for names; this one's controller waits.
	ReasonReconcileConflict = "ReconcileConflict"
)

// finalizerName keeps a Plugin until the manager has unloaded it.
const finalizerName = "setpoint.dev/plugin-manager"

// Options configure a Manager. Zero values get defaults in New.
type Options struct {
	// Service is the object service. Required.
	Service *engine.Service
	// Modules holds uploaded modules. Required.
	Modules *Modules
	// Host loads and runs modules. Required.
	Host Host
	// Controllers runs the controllers of reconcile bindings. Required; the
	// caller runs it.
	Controllers *controller.Manager
	// Metrics records the binding controllers' metrics. Optional.
	Metrics *controller.Metrics
	// Registerer, when set, gets the plugin call counters
	// (setpoint_plugin_calls_total, setpoint_plugin_call_errors_total).
	Registerer prometheus.Registerer
	// StatusInterval is how often a Plugin's call counters are written to
	// its status (only when they changed). Default 10s.
	StatusInterval time.Duration
	// ReportsCounters, when set, says whether this replica writes its call
	// counters (calls, errors, lastError) to the Plugins' status. When it
	// says no, the status keeps the counters it has, so that replicas that
	// share a store do not overwrite one another's counts; the rest of the
	// status is the same on every replica. Default: always.
	ReportsCounters func() bool
	// ModuleGCGrace is how long a module no Plugin uses stays stored (see
	// ModuleGC). Default DefaultModuleGCGrace.
	ModuleGCGrace time.Duration
	// ModuleGCApart: the caller runs ModuleGC().Run itself (on one replica
	// at a time, under leader election); Run does not run it.
	ModuleGCApart bool
	// Finalizes, when set, says whether this replica removes the
	// finalizer of Plugins being deleted (it leads their finalization);
	// every replica unloads a deleted Plugin, but only the one that says
	// yes lets its deletion complete. Default: always.
	Finalizes func() bool
	// ModuleGCInterval is how often the ModuleGC looks for unused modules.
	// Default half of ModuleGCGrace, at most a minute.
	ModuleGCInterval time.Duration
	// Now is the ModuleGC's clock. Default time.Now.
	Now func() time.Time
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// Writes rate-limits the children of reconcile bindings and holds the
	// quota of children per reconcile; nil limits nothing.
	Writes *WriteLimiter
	// Audit records the writes of reconcile bindings (children, status,
	// finalizers, events) in the audit log; nil records nothing.
	Audit Auditor
	// Authorizer decides what each reconcile binding reads, watches and
	// writes, as its plugin's user; nil allows all of it.
	Authorizer authorizer.Authorizer
	// Logs, when set, forgets a deleted Plugin's log.
	Logs *Logs
	// Egress, when set, forgets a deleted Plugin's egress series.
	Egress *EgressMetrics
	// Admitter is the admission chain the Manager keeps in step with the
	// loaded plugins; give the same one to the engine
	// (engine.Options.Admitter). New makes one when nil.
	Admitter *Admitter
}

// Manager follows Plugin objects: it loads their modules into the host and
// swaps them when the spec changes, keeps the admission bindings and the
// reconcile controllers in step, and writes each Plugin's status.
type Manager struct {
	opts Options
	log  *slog.Logger
	adm  *Admitter
	met  *metrics
	gc   *ModuleGC

	// bindMu serializes the reconcile bindings of all Plugins: claims,
	// each loaded.reconcileKey, and the controllers put into and removed
	// from Options.Controllers. Lock order: bindMu, then mu.
	bindMu sync.Mutex
	// claims are the Plugins that bind a reconcile controller, by name: of
	// those that claim one resource, only the first by creation time, then
	// name, runs its controller (see firstClaimLocked).
	claims map[string]claim

	// mu guards plugins, pending and unstarted.
	mu      sync.Mutex
	plugins map[string]*loaded
	// pending are the Plugins that existed when Run started and were not
	// reconciled yet; the Admitter holds writes they may bind until then.
	pending map[string]bool
	// unstarted are all the Plugins that existed when Run started and were
	// not reconciled yet; started is closed once there are none left.
	unstarted map[string]bool
	started   chan struct{}
}

// claim is a Plugin's claim on reconciling a resource.
type claim struct {
	res     schema.GroupResource
	created time.Time
}

// loaded is what the manager made of one Plugin. digest, hostKey, exports
// and admission are written under Manager.mu; reconcileKey under
// Manager.bindMu.
type loaded struct {
	digest    string
	hostKey   string // digest and host config the module was installed with
	exports   Exports
	counters  *counters
	breakers  *breakers
	caller    Caller // guarded by breakers, counting, over the host's stable reference
	admission []*admissionBinding
	// reconcileKey describes the running controller; "" when none runs.
	reconcileKey string
	// privileged: the spec of the version serving sets spec.privileged.
	privileged bool
	// ctl is the controller put into Options.Controllers, nil when none.
	ctl *controller.Controller
	// finalizer is the finalizer the running controller sets, "" when it
	// has none; reconciles is the resource it reconciles.
	finalizer  string
	reconciles string
}

// New checks opts and returns a Manager.
func New(opts Options) (*Manager, error) {
	switch {
	case opts.Service == nil, opts.Modules == nil, opts.Host == nil, opts.Controllers == nil:
		return nil, errors.New("plugins: Options.Service, Modules, Host and Controllers are required")
	}
	if opts.StatusInterval <= 0 {
		opts.StatusInterval = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ModuleGCGrace <= 0 {
		opts.ModuleGCGrace = DefaultModuleGCGrace
	}
	if opts.ModuleGCInterval <= 0 {
		opts.ModuleGCInterval = min(opts.ModuleGCGrace/2, time.Minute)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	if opts.Admitter == nil {
		opts.Admitter = NewAdmitter(log)
	}
	m := &Manager{opts: opts, log: log, met: met, adm: opts.Admitter, plugins: map[string]*loaded{}, pending: map[string]bool{},
		claims: map[string]claim{}, started: make(chan struct{})}
	m.gc = newModuleGC(opts, m.running, log)
	return m, nil
}

// ModuleGC is the garbage collector of modules; Run runs it.
func (m *Manager) ModuleGC() *ModuleGC { return m.gc }

// running maps the digest of each module the manager runs to the Plugins
// it runs it for.
func (m *Manager) running() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]string{}
	for name, l := range m.plugins {
		if l.digest != "" {
			out[l.digest] = append(out[l.digest], name)
		}
	}
	return out
}

// Admitter is the admission chain of the loaded plugins: Options.Admitter.
func (m *Manager) Admitter() *Admitter { return m.adm }

// Run registers the Plugin kind and follows Plugin objects, and runs the
// ModuleGC (unless Options.ModuleGCApart), until ctx is done. It returns
// after its controller and the ModuleGC stopped; the binding controllers
// belong to Options.Controllers.
func (m *Manager) Run(ctx context.Context) error {
	ctx = engine.WithSystemUser(ctx, ManagerUser)
	if err := EnsureKind(ctx, m.opts.Service); err != nil {
		return err
	}
	if err := m.gateStart(ctx); err != nil {
		return err
	}
	c, err := controller.New(controller.Options{
		Name:          "plugin-manager",
		Client:        m.opts.Service,
		For:           controller.Kind{Resource: Resource, Kind: Kind},
		Reconciler:    controller.ReconcilerFunc(m.reconcile),
		Finalizer:     controller.FinalizerFunc(m.finalize),
		FinalizerName: finalizerName,
		Gone:          m.gone,
		// A Plugin waiting for its module to be uploaded, or for the kind
		// it binds to be registered, looks again at least every 10 s.
		RateLimiter: workqueue.NewExponential[controller.Key](100*time.Millisecond, 10*time.Second),
		// A restart loads every stored Plugin at once: as many loads run
		// side by side as there are cores to compile or deserialize the
		// modules on.
		Workers: max(2, runtime.GOMAXPROCS(0)),
		Logger:  m.log,
	})
	if err != nil {
		return fmt.Errorf("plugins: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if !m.opts.ModuleGCApart {
		wg.Go(func() { _ = m.gc.Run(ctx) })
	}
	err = c.Run(ctx)
	cancel()
	wg.Wait()
	return err
}

// finalizeRetry is how often a replica that does not lead the Plugins'
// finalization looks again at a Plugin being deleted, in case it has
// become the leader meanwhile.
const finalizeRetry = time.Second

// finalize unloads a Plugin that is being deleted, on every replica; the
// one that leads the Plugins' finalization (Options.Finalizes) then lets
// the deletion complete, and records the events of the unload on the
// Plugin. The others keep looking until the Plugin is gone (see gone).
func (m *Manager) finalize(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	obj, err := decodeObject(req.Object)
	if err != nil {
		return nil, err
	}
	events := m.unload(obj.GetName())
	m.reconciled(obj.GetName())
	if m.opts.Finalizes != nil && !m.opts.Finalizes() {
		return &abi.FinalizeResponse{RequeueAfter: finalizeRetry}, nil
	}
	m.log.Info("plugin finalized", "plugin", obj.GetName())
	return &abi.FinalizeResponse{Done: true, Events: events}, nil
}

// gone unloads a Plugin that was deleted, on a replica whose controller
// did not see it being deleted (another replica finalized it first).
func (m *Manager) gone(key controller.Key) {
	m.mu.Lock()
	_, ok := m.plugins[key.Name]
	m.mu.Unlock()
	if ok {
		m.unload(key.Name)
	} else {
		m.unbind(key.Name, nil) // a claim without a loaded module
	}
	m.reconciled(key.Name)
}

// unload retires the plugin name; it returns the events to record on the
// Plugin.
func (m *Manager) unload(name string) []abi.Event {
	m.mu.Lock()
	cur, ok := m.plugins[name]
	delete(m.plugins, name)
	m.publishLocked()
	m.mu.Unlock()
	events := m.unbind(name, cur)
	m.opts.Host.Remove(name)
	m.met.forget(name)
	m.opts.Writes.Forget(name)
	m.opts.Logs.Forget(name)
	m.opts.Egress.Forget(name)
	if ok {
		m.log.Info("plugin unloaded", "plugin", name)
	}
	return events
}

// Loaded returns the digest serving calls for the plugin name, if any.
func (m *Manager) Loaded(name string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.plugins[name]; l != nil && l.digest != "" {
		return l.digest, true
	}
	return "", false
}
