package plugins

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Prometheus series of plugin calls; a nil *metrics
// records nothing.
type metrics struct {
	calls, errors *prometheus.CounterVec
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
	}
	for _, c := range []prometheus.Collector{m.calls, m.errors} {
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
	}
}
