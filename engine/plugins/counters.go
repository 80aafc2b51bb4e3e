package plugins

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

var _ controller.FailureRecorder = countingCaller{}

// counters count one plugin's calls for its status.
type counters struct {
	calls, errors atomic.Int64
	lastError     atomic.Pointer[string]
	// callsMetric and errorsMetric, when set, count the same in Prometheus.
	callsMetric, errorsMetric prometheus.Counter
}

func (c *counters) record(err error) {
	c.calls.Add(1)
	if c.callsMetric != nil {
		c.callsMetric.Inc()
	}
	if err != nil {
		c.fail(err)
	}
}

// fail counts a failure: of a call, or of a write the engine made with a
// call's output, or a host-call write the server refused.
func (c *counters) fail(err error) {
	c.errors.Add(1)
	if c.errorsMetric != nil {
		c.errorsMetric.Inc()
	}
	msg := err.Error()
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	c.lastError.Store(&msg)
}

// countingCaller counts the calls of a Caller, and the failures of the
// writes the controller makes with its output.
//
// It implements controller.FailureRecorder.
type countingCaller struct {
	Caller
	c *counters
	// writes, when set, holds the quota of children per reconcile.
	writes *WriteLimiter
}

func (cc countingCaller) Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	resp, err := cc.Caller.Reconcile(ctx, req)
	cc.c.record(err)
	if err == nil && resp != nil && resp.Error == "" {
		if qerr := cc.writes.checkChildren(len(resp.Children)); qerr != nil {
			// Over quota: nothing is applied, and the object says why.
			cc.c.fail(qerr)
			resp.Error, resp.Terminal, resp.Children = qerr.Error(), true, nil
		}
	}
	return resp, err
}

func (cc countingCaller) Admit(ctx context.Context, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	resp, err := cc.Caller.Admit(ctx, req)
	cc.c.record(err)
	return resp, err
}

func (cc countingCaller) Finalize(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	resp, err := cc.Caller.Finalize(ctx, req)
	cc.c.record(err)
	return resp, err
}

// RecordFailure counts a status or children write the server refused in the
// plugin's errors and last error.
func (cc countingCaller) RecordFailure(err error) { cc.c.fail(err) }
