package plugins

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// startWait is how long a Plugin's reconcile waits for its new controller
// to start before it reports that the controller has not started yet.
const startWait = 2 * time.Second

// notRunning says why the plugin's reconcile controller, which its binding
// put into the controller manager, does not run yet; "" when it runs or the
// plugin binds none. A controller usually starts within milliseconds; one
// waits for a stopping controller of the same kind (a replaced or deleted
// Plugin's, whose guest may be stuck in a call), or for this replica to lead.
func (m *Manager) notRunning(ctx context.Context, name string, cur *loaded) string {
	m.bindMu.Lock()
	c, reconciles := cur.ctl, cur.reconciles
	m.bindMu.Unlock()
	if c == nil {
		return ""
	}
	started := m.opts.Controllers.Started(c)
	if started == nil {
		return ""
	}
	t := time.NewTimer(startWait)
	defer t.Stop()
	select {
	case <-started:
		return ""
	case <-ctx.Done():
	case <-t.C:
	}
	why := fmt.Sprintf("its reconcile controller for %s has not started", reconciles)
	if other := m.opts.Controllers.WaitsFor(c.Name()); other != "" {
		why += fmt.Sprintf(": it waits for the controller %q, of the same kind, to stop", other)
	} else {
		why += ": the controllers do not run on this server (it does not lead)"
	}
	return why
}

// starting reports a plugin whose module serves but whose reconcile
// controller has not started: Loaded (the module serves admission), phase
// Pending, and an error so that Ready is False and the Plugin is looked at
// again with backoff until the controller runs.
func (st *status) starting(why string) *abi.ReconcileResponse {
	return &abi.ReconcileResponse{
		Status: st.doc(PhasePending, metav1.ConditionTrue, ReasonLoaded, "module "+st.loadedDigest+" serves calls; "+why),
		Error:  why,
	}
}
