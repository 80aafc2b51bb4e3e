package plugins

import (
	"context"
	"time"

	"github.com/setpoint-dev/setpoint/engine"
)

// A replica learns of a new Plugin from the store and then compiles its
// module, which takes seconds for a large one; the replica the Plugin was
// installed through, or another, may report it Loaded meanwhile. Until
// this replica's first load of the Plugin ends, the writes its admission
// rules bind wait here, as they wait for the stored Plugins at startup
// (startupGate), so that a policy that is in force on one replica is not
// skipped by a write through another one that is still compiling it.

// openLoading holds the writes to resources until closeLoading(name).
func (a *Admitter) openLoading(name string, resources []string) {
	a.loadMu.Lock()
	defer a.loadMu.Unlock()
	if a.loading == nil {
		a.loading = map[string]*startupGate{}
	}
	if _, ok := a.loading[name]; ok {
		return
	}
	a.loading[name] = &startupGate{done: make(chan struct{}), resources: resources, wait: DefaultStartupWait}
}

// closeLoading lets the writes openLoading(name) held go on.
func (a *Admitter) closeLoading(name string) {
	a.loadMu.Lock()
	defer a.loadMu.Unlock()
	if g, ok := a.loading[name]; ok {
		close(g.done)
		delete(a.loading, name)
	}
}

// holdLoading waits until no Plugin in its first load binds req, or for
// the startup wait, after which the write goes on with the plugins loaded
// so far.
func (a *Admitter) holdLoading(ctx context.Context, req *engine.AdmissionRequest) error {
	a.loadMu.Lock()
	var gates []*startupGate
	for _, g := range a.loading {
		if g.holds(req) {
			gates = append(gates, g)
		}
	}
	a.loadMu.Unlock()
	if len(gates) == 0 {
		return nil
	}
	t := time.NewTimer(DefaultStartupWait)
	defer t.Stop()
	for _, g := range gates {
		select {
		case <-g.done:
		case <-t.C:
			a.log.Warn("admitting a write before a new plugin loaded", "resource", req.Resource.Resource, "name", req.Name)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
