package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

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
	st.reportsCounters = m.opts.ReportsCounters == nil || m.opts.ReportsCounters()

	sp, err := specOf(obj)
	if err != nil {
		m.unclaimIdle(name, cur)
		return st.fail(ReasonInvalidSpec, err, true), nil
	}
	if cur == nil {
		cur = &loaded{counters: m.met.forPlugin(name), breakers: newBreakers(name, m.met, time.Now)}
		cur.caller = breakerCaller{countingCaller: countingCaller{Caller: m.opts.Host.Caller(name), c: cur.counters, writes: m.opts.Writes}, b: cur.breakers}
		st.cur = cur
	}
	cur.breakers.observe(obj.GetGeneration())
	cfg, refused := m.checkSpec(name, cur, sp)
	if refused != nil {
		return refused.response(st), nil
	}
	if err := m.ensureRole(ctx, obj, sp); err != nil {
		return nil, err
	}
	if len(sp.Admission) > 0 && cur.digest == "" {
		// Its first load on this replica: hold the writes it binds (its
		// own writes above are done).
		var resources []string
		for _, r := range sp.Admission {
			resources = append(resources, r.Resources...)
		}
		m.adm.openLoading(name, resources)
		defer m.adm.closeLoading(name)
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
	events = append(events, cur.breakers.events()...)
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
	// reportsCounters: the status gets this replica's call counters, else
	// keeps those it has.
	reportsCounters bool
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
	cand, err := m.opts.Host.Stage(ctx, name, wasm, prev, cfg)
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
	if st.cur != nil && st.cur.exports.Tier != nil {
		out["tier"] = st.cur.exports.Tier.Tier()
		if e := st.cur.exports.Tier.TierError(); e != "" {
			out["tierError"] = e
		}
	}
	switch {
	case !st.reportsCounters:
		for _, k := range []string{"calls", "errors", "lastError"} {
			if v, ok := st.observed[k]; ok {
				out[k] = v
			}
		}
	case st.cur != nil:
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
	if st.cur != nil && st.cur.breakers != nil {
		if c := st.cur.breakers.condition(st.generation); c != nil {
			conds = append(conds, c)
		}
	}
	out["conditions"] = conds
	b, _ := json.Marshal(out)
	return b
}
