package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

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
	// ModuleGCGrace is how long a module no Plugin uses stays stored (see
	// ModuleGC). Default DefaultModuleGCGrace.
	ModuleGCGrace time.Duration
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
	// Logs, when set, forgets a deleted Plugin's log.
	Logs *Logs
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

	// mu guards plugins and pending.
	mu      sync.Mutex
	plugins map[string]*loaded
	// pending are the Plugins that existed when Run started and were not
	// reconciled yet; the Admitter holds writes they may bind until then.
	pending map[string]bool
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
	caller    Caller // counting, over the host's stable reference
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
	m := &Manager{opts: opts, log: log, met: met, adm: newAdmitter(log), plugins: map[string]*loaded{}, pending: map[string]bool{},
		claims: map[string]claim{}}
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

// Admitter is the admission chain of the loaded plugins; install it with
// engine.Service.SetAdmitter.
func (m *Manager) Admitter() *Admitter { return m.adm }

// Run registers the Plugin kind and follows Plugin objects, and runs the
// ModuleGC, until ctx is done. It returns after its controller and the
// ModuleGC stopped; the binding controllers belong to Options.Controllers.
func (m *Manager) Run(ctx context.Context) error {
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
		// A Plugin waiting for its module to be uploaded, or for the kind
		// it binds to be registered, looks again at least every 10 s.
		RateLimiter: workqueue.NewExponential[controller.Key](100*time.Millisecond, 10*time.Second),
		Workers:     2,
		Logger:      m.log,
	})
	if err != nil {
		return fmt.Errorf("plugins: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { _ = m.gc.Run(ctx) })
	err = c.Run(ctx)
	cancel()
	wg.Wait()
	return err
}

// reconcile brings one Plugin's module and bindings in line with its spec:
// it checks the spec (checkSpec), loads the module the spec names or keeps
// the one serving (loadModule), binds the module's admission rules and
// controller (bind), and reports the outcome in the Plugin's status
// (outcome).
func (m *Manager) reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	obj, err := decodeObject(req.Object)
	if err != nil {
		return nil, err
	}
	name := obj.GetName()
	defer m.reconciled(name)
	m.mu.Lock()
	cur := m.plugins[name]
	m.mu.Unlock()
	st := newStatus(obj, cur)

	sp, err := specOf(obj)
	if err != nil {
		m.unclaimIdle(name, cur)
		return st.fail(ReasonInvalidSpec, err, true), nil
	}
	if cur == nil {
		cur = &loaded{counters: m.met.forPlugin(name)}
		cur.caller = countingCaller{Caller: m.opts.Host.Caller(name), c: cur.counters, writes: m.opts.Writes}
		st.cur = cur
	}
	cfg, refused := m.checkSpec(name, cur, sp)
	if refused != nil {
		return refused.response(st), nil
	}
	failed, restored, events, err := m.loadModule(ctx, name, obj, cur, sp, cfg)
	if err != nil {
		return nil, err
	}
	if failed != nil && !restored {
		m.unserved(name, cur, sp, failed.err)
		return failed.response(st), nil
	}
	st.loadedDigest = cur.digest
	b := m.bind(name, obj, cur, sp)
	events = append(events, b.events...)
	return withEvents(events, m.outcome(ctx, name, cur, st, failed, b)), nil
}

// checkSpec checks what the spec asks beyond its syntax (privileges, the
// host configuration of the kinds it names) and returns the module's host
// configuration, or why the spec is refused.
func (m *Manager) checkSpec(name string, cur *loaded, sp Spec) (Config, *failure) {
	if err := sp.checkPrivileges(); err != nil {
		m.unserved(name, cur, sp, err)
		return Config{}, &failure{reason: ReasonInvalidSpec, err: err, terminal: true}
	}
	cfg, err := sp.hostConfig(m.opts.Service)
	if err != nil {
		m.unserved(name, cur, sp, err)
		if errors.Is(err, ErrNotServed) {
			return Config{}, &failure{reason: ReasonNotServed, err: err}
		}
		return Config{}, &failure{reason: ReasonInvalidSpec, err: err, terminal: true}
	}
	return cfg, nil
}

// unserved handles a spec that no module serves: the Plugin gives up its
// claim on the kind it reconciles unless an earlier version's controller
// still runs, and, when no version is loaded, its admission rules are bound
// to calls that fail with why.
func (m *Manager) unserved(name string, cur *loaded, sp Spec, why error) {
	m.unclaimIdle(name, cur)
	if cur.digest == "" {
		m.bindUnservable(name, cur, sp, why)
	}
}

// loadModule swaps in the module and host configuration the spec names,
// when they differ from those loaded. When the spec's module does not
// serve, failed says why and the module loaded before keeps serving; when
// this process loaded none yet, the module that served before the restart
// is loaded in its place if it can be (restored), and the bindings are then
// set up for that one. It returns an error only for what a retry may cure.
func (m *Manager) loadModule(ctx context.Context, name string, obj *unstructured.Unstructured, cur *loaded, sp Spec, cfg Config) (failed *failure, restored bool, events []abi.Event, err error) {
	hostKey := sp.Module.Digest + " " + mustJSON(cfg)
	if cur.hostKey == hostKey {
		return nil, false, nil, nil
	}
	failed, events, err = m.upgrade(ctx, name, obj, cur, sp, cfg, hostKey)
	if err != nil || failed == nil {
		return failed, false, events, err
	}
	restored = m.restoreServing(ctx, name, obj, cur, sp, cfg, &events)
	return failed, restored, events, nil
}

// binding is what binding a loaded module to its spec gave: the exports the
// spec binds and the module lacks, the reconcile binding's error, and the
// events of a controller stopped.
type binding struct {
	missing []string
	err     error
	events  []abi.Event
}

// bind binds the loaded module's admission rules and its reconcile
// controller as the spec says. A rule the module cannot serve stays bound
// and fails every call, so that failurePolicy decides: Fail refuses the
// writes it covers, naming the plugin and why.
func (m *Manager) bind(name string, obj *unstructured.Unstructured, cur *loaded, sp Spec) binding {
	var b binding
	var noAdmit error
	if len(sp.Admission) > 0 && !cur.exports.Admit {
		b.missing = append(b.missing, "admit")
		noAdmit = fmt.Errorf("module %s does not export admit, which spec.admission binds", cur.digest)
	}
	m.mu.Lock()
	cur.admission = admissionBindings(name, cur.caller, sp, noAdmit)
	cur.privileged = sp.Privileged
	m.publishLocked()
	m.mu.Unlock()

	switch {
	case sp.Reconcile == nil:
		b.events = m.unbind(name, cur)
	case !cur.exports.Reconcile:
		b.missing = append(b.missing, "reconcile")
		b.events = m.unbind(name, cur) // the previous version may have had it
	default:
		b.err = m.bindReconcile(name, obj.GetCreationTimestamp().Time, cur, sp)
	}
	return b
}

// outcome is the status that reports a reconcile: why the spec's module
// does not serve (failed, when a restored module serves in its place), an
// export the spec binds and the module lacks, a reconcile binding refused,
// a controller not running yet, or the module serving.
func (m *Manager) outcome(ctx context.Context, name string, cur *loaded, st *status, failed *failure, b binding) *abi.ReconcileResponse {
	switch {
	case failed != nil:
		return failed.response(st)
	case len(b.missing) > 0:
		return st.fail(ReasonMissingExport, fmt.Errorf("module %s does not export %s, which the spec binds", cur.digest, strings.Join(b.missing, " and ")), true)
	case errors.Is(b.err, ErrReconcileConflict):
		return st.fail(ReasonReconcileConflict, b.err, false)
	case b.err != nil:
		return st.fail(ReasonNotServed, b.err, false)
	}
	if why := m.notRunning(ctx, name, cur); why != "" {
		return st.starting(why)
	}
	return st.ok(m.opts.StatusInterval)
}

// bindReconcile puts the plugin's controller into the controller manager,
// replacing it only when the binding changed, if the plugin is the first
// (by creation time, then name) to claim the resource it reconciles; it
// stops the controller of any other Plugin that reconciles the resource.
// Otherwise it stops the plugin's controller, if it ran, and returns
// ErrReconcileConflict: two controllers of one kind would each take the
// other's children (controlled by the same object) for their own and
// delete them. The loser retries with backoff, and takes over once the
// first no longer claims the resource.
func (m *Manager) bindReconcile(name string, created time.Time, cur *loaded, sp Spec) error {
	m.bindMu.Lock()
	defer m.bindMu.Unlock()
	res := schema.ParseGroupResource(sp.Reconcile.For)
	m.claims[name] = claim{res: res, created: created}
	if first := m.firstClaimLocked(res); first != name {
		m.stopLocked(name, cur)
		return fmt.Errorf("%w: %s is reconciled by Plugin %q, created before this one; this Plugin's reconcile binding waits until %q no longer reconciles it",
			ErrReconcileConflict, res, first, first)
	}
	for other, c := range m.claims {
		if other == name || c.res != res {
			continue
		}
		m.mu.Lock()
		l := m.plugins[other]
		m.mu.Unlock()
		if l != nil && l.reconcileKey != "" {
			m.log.Warn("plugin reconcile binding stopped: a Plugin created before it reconciles the same kind", "plugin", other, "for", res.String(), "by", name)
			m.stopLocked(other, l)
		}
	}
	forRes, err := resolve(m.opts.Service, sp.Reconcile.For)
	if err != nil {
		return fmt.Errorf("spec.reconcile.for: %w", err)
	}
	owns := make([]controller.Kind, 0, len(sp.Reconcile.Owns))
	for _, o := range sp.Reconcile.Owns {
		r, err := resolve(m.opts.Service, o)
		if err != nil {
			return fmt.Errorf("spec.reconcile.owns: %w", err)
		}
		owns = append(owns, controllerKind(r))
	}
	// A new module or host configuration restarts the controller too, so
	// that every object is reconciled by the new version.
	key := mustJSON([]any{forRes.GVR, owns, sp.Config, cur.exports.Finalize, cur.hostKey})
	if key == cur.reconcileKey {
		return nil
	}
	opts := controller.Options{
		Name:       name,
		Client:     m.opts.Writes.Client(name, m.opts.Service, owns),
		For:        controllerKind(forRes),
		Owns:       owns,
		Reconciler: cur.caller,
		Config:     maps.Clone(sp.Config),
		Metrics:    m.opts.Metrics,
		// Children, status and finalizers are written as the plugin, so
		// that admission checks them as it checks its host-call writes.
		User:   pluginIdentity(name),
		Logger: m.log.With("plugin", name),
	}
	finalizer := ""
	if cur.exports.Finalize {
		opts.Finalizer = cur.caller
		finalizer = finalizerOf(name)
		opts.FinalizerName = finalizer
	}
	c, err := controller.New(opts)
	if err != nil {
		return fmt.Errorf("spec.reconcile: %w", err)
	}
	m.opts.Controllers.Put(c)
	cur.reconcileKey, cur.finalizer, cur.reconciles, cur.ctl = key, finalizer, forRes.GVR.GroupResource().String(), c
	m.log.Info("plugin reconcile binding started", "plugin", name, "for", forRes.GVR.String())
	return nil
}

// firstClaimLocked returns the Plugin that reconciles res: the first by
// creation time, then name, of those that claim it. m.bindMu is held.
func (m *Manager) firstClaimLocked(res schema.GroupResource) string {
	first := ""
	var fc claim
	for n, c := range m.claims {
		if c.res != res {
			continue
		}
		if first == "" || c.created.Before(fc.created) || (c.created.Equal(fc.created) && n < first) {
			first, fc = n, c
		}
	}
	return first
}

// finalizerOf is the finalizer the controller of the plugin name sets on
// the objects it reconciles, when its module exports finalize.
func finalizerOf(name string) string { return "setpoint.dev/" + name }

// stopLocked stops the plugin's controller, if it runs. m.bindMu is held.
//
// A controller that had a finalizer leaves it on the objects it was set
// on: their deletion waits until someone removes it, as in Kubernetes when
// an operator is uninstalled. Removing it here would skip the plugin's
// cleanup of objects it may be about to run again for (a Plugin recreated,
// a binding restored), so stopLocked only says so: in the log, and in the
// returned Warning event for the Plugin.
func (m *Manager) stopLocked(name string, cur *loaded) []abi.Event {
	if cur == nil || cur.reconcileKey == "" {
		return nil
	}
	m.opts.Controllers.Remove(name)
	cur.reconcileKey, cur.ctl = "", nil
	if cur.finalizer == "" {
		return nil
	}
	fin := cur.finalizer
	cur.finalizer = ""
	m.log.Warn("plugin reconcile controller stopped; its finalizer stays on the objects that carry it, whose deletion waits until it is removed",
		"plugin", name, "finalizer", fin, "resource", cur.reconciles)
	return []abi.Event{{Type: "Warning", Reason: "FinalizerLeft", Message: fmt.Sprintf(
		"reconcile controller stopped: %s objects that carry the finalizer %s keep it, and their deletion waits until it is removed "+
			"(kubectl patch %s NAME --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/INDEX\"}]')",
		cur.reconciles, fin, cur.reconciles)}}
}

// unbind drops the plugin's reconcile binding: its claim and its
// controller. It returns the events to record on the Plugin.
func (m *Manager) unbind(name string, cur *loaded) []abi.Event {
	m.bindMu.Lock()
	defer m.bindMu.Unlock()
	delete(m.claims, name)
	return m.stopLocked(name, cur)
}

// unclaimIdle drops the claim of a plugin whose spec cannot be served,
// unless its controller still runs (an earlier version keeps serving): a
// Plugin that runs no controller does not keep another from reconciling
// the kind.
func (m *Manager) unclaimIdle(name string, cur *loaded) {
	m.bindMu.Lock()
	defer m.bindMu.Unlock()
	if cur == nil || cur.reconcileKey == "" {
		delete(m.claims, name)
	}
}

// publishLocked hands the admission bindings of every plugin to the
// Admitter. m.mu is held.
func (m *Manager) publishLocked() {
	var all []*admissionBinding
	privileged := map[string]bool{}
	for name, l := range m.plugins {
		all = append(all, l.admission...)
		if l.privileged {
			privileged[name] = true
		}
	}
	m.adm.privileged.Store(&privileged)
	m.adm.set(all)
}

// finalize unloads a Plugin that is being deleted.
func (m *Manager) finalize(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	obj, err := decodeObject(req.Object)
	if err != nil {
		return nil, err
	}
	events := m.unload(obj.GetName())
	m.reconciled(obj.GetName())
	return &abi.FinalizeResponse{Done: true, Events: events}, nil
}

// unload retires the plugin name; it returns the events to record on the
// Plugin.
func (m *Manager) unload(name string) []abi.Event {
	m.mu.Lock()
	cur := m.plugins[name]
	delete(m.plugins, name)
	m.publishLocked()
	m.mu.Unlock()
	events := m.unbind(name, cur)
	m.opts.Host.Remove(name)
	m.met.forget(name)
	m.opts.Writes.Forget(name)
	m.opts.Logs.Forget(name)
	m.log.Info("plugin unloaded", "plugin", name)
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

func withEvents(events []abi.Event, resp *abi.ReconcileResponse) *abi.ReconcileResponse {
	resp.Events = append(events, resp.Events...)
	return resp
}

func decodeObject(raw []byte) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("plugins: decode Plugin: not a JSON object")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// status builds a Plugin's status.
type status struct {
	observed     map[string]any
	cur          *loaded
	loadedDigest string
	generation   int64
}

func newStatus(obj *unstructured.Unstructured, cur *loaded) *status {
	observed, _, _ := unstructured.NestedMap(obj.Object, "status")
	st := &status{observed: observed, cur: cur, generation: obj.GetGeneration()}
	if cur != nil {
		st.loadedDigest = cur.digest
	}
	return st
}

// restoreServing loads, when this process runs no version of the Plugin
// yet, the module its status says served before (status.loadedDigest), so
// that a restart does not stop a plugin whose new module was refused or is
// missing: the module loaded before keeps serving, as it did before the
// restart, with the spec's current bindings. It reports whether it did.
func (m *Manager) restoreServing(ctx context.Context, name string, obj *unstructured.Unstructured, cur *loaded, sp Spec, cfg Config, events *[]abi.Event) bool {
	prev, _, _ := unstructured.NestedString(obj.Object, "status", "loadedDigest")
	if cur.digest != "" || prev == "" || prev == sp.Module.Digest {
		return false
	}
	wasm, err := m.opts.Modules.Get(ctx, prev)
	if err != nil {
		m.log.Warn("module that served before the restart is gone; nothing serves", "plugin", name, "digest", prev, "err", err)
		return false
	}
	cand, err := m.opts.Host.Stage(ctx, name, wasm, cfg)
	if err != nil {
		m.log.Warn("module that served before the restart no longer loads; nothing serves", "plugin", name, "digest", prev, "err", err)
		return false
	}
	exports := cand.Exports()
	if err := cand.Commit(); err != nil {
		m.log.Warn("module that served before the restart could not be swapped in; nothing serves", "plugin", name, "digest", prev, "err", err)
		return false
	}
	m.log.Info("plugin restored: the module that served before the restart serves again", "plugin", name, "digest", prev, "spec digest", sp.Module.Digest)
	*events = append(*events, abi.Event{Type: "Normal", Reason: "ModuleRestored",
		Message: "loaded module " + prev + ", which served before the restart, since module " + sp.Module.Digest + " does not load"})
	m.mu.Lock()
	cur.digest, cur.hostKey, cur.exports = prev, prev+" "+mustJSON(cfg), exports
	m.plugins[name] = cur
	m.mu.Unlock()
	return true
}

// failure is why the spec's module does not serve.
type failure struct {
	reason   string
	err      error
	terminal bool
	events   []abi.Event
}

// response is the answer that reports f in st.
func (f *failure) response(st *status) *abi.ReconcileResponse {
	resp := st.fail(f.reason, f.err, f.terminal)
	resp.Events = append(resp.Events, f.events...)
	return resp
}

// fail reports a problem: the Loaded condition says why, and the module
// loaded before, if any, keeps serving.
func (st *status) fail(reason string, err error, terminal bool) *abi.ReconcileResponse {
	phase := PhaseFailed
	if reason == ReasonModuleNotFound || reason == ReasonNotServed || reason == ReasonReconcileConflict {
		phase = PhasePending
	}
	msg := err.Error()
	if st.loadedDigest != "" {
		msg += "; module " + st.loadedDigest + " keeps serving"
	}
	return &abi.ReconcileResponse{
		Status:   st.doc(phase, metav1.ConditionFalse, reason, msg),
		Error:    err.Error(),
		Terminal: terminal,
	}
}

// ok reports a loaded plugin, and asks to be called again after interval
// so that the call counters reach the status.
func (st *status) ok(interval time.Duration) *abi.ReconcileResponse {
	return &abi.ReconcileResponse{
		Status:       st.doc(PhaseLoaded, metav1.ConditionTrue, ReasonLoaded, "module "+st.loadedDigest+" serves calls"),
		RequeueAfter: interval,
	}
}

func (st *status) doc(phase string, cs metav1.ConditionStatus, reason, msg string) abi.RawJSON {
	out := map[string]any{"phase": phase}
	if st.loadedDigest != "" {
		out["loadedDigest"] = st.loadedDigest
	}
	if st.cur != nil && st.cur.exports.Preemption != "" {
		out["preemption"] = st.cur.exports.Preemption
	}
	if st.cur != nil {
		out["calls"] = st.cur.counters.calls.Load()
		out["errors"] = st.cur.counters.errors.Load()
		if e := st.cur.counters.lastError.Load(); e != nil {
			out["lastError"] = *e
		}
	}
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	loadedCond := map[string]any{
		"type": ConditionLoaded, "status": string(cs), "reason": reason, "message": msg,
		"observedGeneration": st.generation,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
	conds := []any{loadedCond}
	old, _ := st.observed["conditions"].([]any)
	for _, c := range old {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		switch cm["type"] {
		case ConditionLoaded:
			if cm["status"] == string(cs) {
				loadedCond["lastTransitionTime"] = cm["lastTransitionTime"]
			}
		case controller.ConditionReady:
			conds = append(conds, cm) // the controller keeps it
		}
	}
	out["conditions"] = conds
	b, _ := json.Marshal(out)
	return b
}
