package plugins

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Prometheus series of plugin calls; a nil *metrics
// records nothing.
type metrics struct {
	calls, errors *prometheus.CounterVec
	// breakerOpen and suspended are the circuit breakers' series (see
	// breaker.go), by plugin and class of calls.
	breakerOpen *prometheus.GaugeVec
	suspended   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "plugin", Name: "calls_total",
			Help: "Calls into a plugin (admission, reconcile, finalize) since the server started.",
		}, []string{"plugin"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "plugin", Name: "call_errors_total",
			Help: "Calls into a plugin that failed (trap, timeout, bad output, no such plugin).",
		}, []string{"plugin"}),
		breakerOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "setpoint", Subsystem: "plugin", Name: "calls_suspended",
			Help: "1 while a plugin's calls of a class (reconcile, admit) are suspended after repeated failures, else 0.",
		}, []string{"plugin", "calls"}),
		suspended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "plugin", Name: "calls_refused_total",
			Help: "Calls into a plugin refused because its calls were suspended after repeated failures.",
		}, []string{"plugin", "calls"}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.errors, m.breakerOpen, m.suspended} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("plugins: register metrics: %w", err)
		}
	}
	return m, nil
}

// forPlugin returns the counters of one plugin, with its series.
func (m *metrics) forPlugin(name string) *counters {
	c := &counters{}
	if m != nil {
		c.callsMetric = m.calls.WithLabelValues(name)
		c.errorsMetric = m.errors.WithLabelValues(name)
	}
	return c
}

// forget drops a removed plugin's series.
func (m *metrics) forget(name string) {
	if m != nil {
		m.calls.DeleteLabelValues(name)
		m.errors.DeleteLabelValues(name)
		m.breakerOpen.DeletePartialMatch(prometheus.Labels{"plugin": name})
		m.suspended.DeletePartialMatch(prometheus.Labels{"plugin": name})
	}
}
