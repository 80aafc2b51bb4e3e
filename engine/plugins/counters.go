package plugins

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

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
}

// countingCaller counts the calls of a Caller.
type countingCaller struct {
	Caller
	c *counters
}

func (cc countingCaller) Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	resp, err := cc.Caller.Reconcile(ctx, req)
	cc.c.record(err)
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
