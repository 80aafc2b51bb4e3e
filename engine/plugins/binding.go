package plugins

import (
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

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
	workers := sp.Reconcile.Workers
	if workers <= 0 {
		workers = DefaultWorkers()
	}
	key := mustJSON([]any{forRes.GVR, owns, sp.Config, cur.exports.Finalize, cur.hostKey, workers})
	if key == cur.reconcileKey {
		return nil
	}
	opts := controller.Options{
		Name: name,
		Client: auditClient(m.opts.Audit, m.opts.Writes.Client(name,
			authorizeClient(m.opts.Authorizer, name, m.opts.Service), owns)),
		For:        controllerKind(forRes),
		Owns:       owns,
		Reconciler: cur.caller,
		Config:     maps.Clone(sp.Config),
		Workers:    workers,
		Metrics:    m.opts.Metrics,
		// Children, status and finalizers are written as the plugin, so
		// that admission checks them as it checks its host-call writes.
		User:   PluginUser(name),
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
