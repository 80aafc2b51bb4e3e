package plugins

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// EgressMetrics count the plugins' HTTP calls to the outside world: the
// Wasm host tells it about each (it implements the host's EgressObserver).
// The host label is the grant that matched, as spec.egress.allow writes
// it ("none" when none did), so that a guest cannot mint series by calling
// made-up hosts. A nil *EgressMetrics records nothing.
type EgressMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewEgressMetrics registers the series with reg; a nil reg gives a nil
// *EgressMetrics.
func NewEgressMetrics(reg prometheus.Registerer) (*EgressMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &EgressMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "plugin", Name: "egress_requests_total",
			Help: "HTTP calls plugins made to the outside world, by plugin, grant (host) and status: the HTTP code, or why there was no response (forbidden, timeout, toolarge, tls, unavailable, badrequest).",
		}, []string{"plugin", "host", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint", Subsystem: "plugin", Name: "egress_request_duration_seconds",
			Help:    "How long plugins' HTTP calls to the outside world took, by plugin and grant (host).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9), // 0.5 ms to 33 s
		}, []string{"plugin", "host"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("plugins: register egress metrics: %w", err)
		}
	}
	return m, nil
}

// ObserveEgress counts one call.
func (m *EgressMetrics) ObserveEgress(plugin, grant, status string, d time.Duration) {
	if m == nil {
		return
	}
	if grant == "" {
		grant = "none"
	}
	m.requests.WithLabelValues(plugin, grant, status).Inc()
	m.duration.WithLabelValues(plugin, grant).Observe(d.Seconds())
}

// Forget drops a removed plugin's series.
func (m *EgressMetrics) Forget(plugin string) {
	if m != nil {
		m.requests.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
		m.duration.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
	}
}
