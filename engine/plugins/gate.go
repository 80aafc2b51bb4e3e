package plugins

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// DefaultStartupWait bounds how long a write waits for the admission
// plugins that existed at startup to load.
const DefaultStartupWait = 30 * time.Second

// startupGate holds writes to the resources that the Plugins stored at
// startup bind for admission, until those Plugins are reconciled once, so
// that a restart does not open a window in which policies are skipped.
type startupGate struct {
	done      chan struct{}
	resources []string // as in AdmissionRule.Resources; "*" for all
	wait      time.Duration
}

// holds reports whether req may be bound by a pending plugin.
func (g *startupGate) holds(req *engine.AdmissionRequest) bool {
	gr := req.Resource.GroupResource()
	switch gr {
	case kinds.CRDResource.GroupResource(), kinds.EventResource.GroupResource(), kinds.NamespaceResource.GroupResource():
		return false // the server's own bookkeeping
	}
	return slices.Contains(g.resources, "*") || slices.Contains(g.resources, gr.String())
}

// hold waits until the current gate is open, when it holds req. After the
// startup wait the write goes on with the plugins loaded so far.
func (a *Admitter) hold(ctx context.Context, req *engine.AdmissionRequest) error {
	var timeout <-chan time.Time
	for {
		g := a.gate.Load()
		select {
		case <-g.done:
			if a.gate.Load() == g {
				return nil
			}
			continue // replaced: check the new gate
		default:
		}
		if !g.holds(req) {
			return nil
		}
		if timeout == nil {
			t := time.NewTimer(g.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-g.done:
		case <-timeout:
			a.log.Warn("admitting a write before the stored plugins loaded", "resource", req.Resource.Resource, "name", req.Name)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// gateStart lists the stored Plugins and closes the Admitter's gate once
// each was reconciled (or at once when there are none). It also records
// their reconcile claims (see Manager.claims).
func (m *Manager) gateStart(ctx context.Context) error {
	list, err := m.opts.Service.List(ctx, Resource, "", metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("plugins: list Plugins: %w", err)
	}
	m.bindMu.Lock()
	defer m.bindMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	var resources []string
	unstarted := map[string]bool{}
	for i := range list.Items {
		unstarted[list.Items[i].GetName()] = true
		sp, err := specOf(&list.Items[i])
		if err == nil && sp.Reconcile != nil && list.Items[i].GetDeletionTimestamp() == nil {
			// Until it is reconciled, a stored Plugin is taken to run its
			// controller, so that a later one of the same kind, reconciled
			// first after a restart, does not run meanwhile.
			m.claims[list.Items[i].GetName()] = claim{res: schema.ParseGroupResource(sp.Reconcile.For), created: list.Items[i].GetCreationTimestamp().Time}
		}
		// A Plugin that failed for good is held for too: its reconcile
		// binds the admission rules it cannot serve to refusals (see
		// admissionBindings), which must be in force before writes go on.
		if err != nil || len(sp.Admission) == 0 {
			continue
		}
		m.pending[list.Items[i].GetName()] = true
		for _, r := range sp.Admission {
			resources = append(resources, r.Resources...)
		}
	}
	// The first gate holds every write until this one replaces it.
	first := m.adm.gate.Load()
	g := &startupGate{done: make(chan struct{}), resources: resources, wait: first.wait}
	m.adm.gate.Store(g)
	close(first.done)
	if len(m.pending) == 0 {
		close(g.done)
	} else {
		m.log.Info("holding writes to admitted resources until the stored plugins load", "plugins", len(m.pending))
	}
	if m.unstarted == nil { // the first Run
		m.unstarted = unstarted
		m.startedLocked()
	}
	return nil
}

// Started is closed once each Plugin stored when Run first started has
// been reconciled once: loaded and bound, or failed and reported. Work
// that can wait at start (a full list by the garbage collector) waits for
// it, so that the plugins serve first.
func (m *Manager) Started() <-chan struct{} { return m.started }

// startedLocked closes started when no stored Plugin is left to reconcile.
// Call it with mu held.
func (m *Manager) startedLocked() {
	if len(m.unstarted) == 0 {
		select {
		case <-m.started:
		default:
			close(m.started)
			m.log.Info("stored plugins reconciled")
		}
	}
}

// reconciled notes that the Plugin name was reconciled once.
func (m *Manager) reconciled(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unstarted[name] {
		delete(m.unstarted, name)
		m.startedLocked()
	}
	if !m.pending[name] {
		return
	}
	delete(m.pending, name)
	if len(m.pending) == 0 {
		close(m.adm.gate.Load().done)
		m.log.Info("stored plugins loaded; admission gate open")
	}
}
