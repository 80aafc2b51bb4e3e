package election

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gauges of a Leases; nil records nothing.
type metrics struct {
	leading *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer, identity string) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{leading: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "setpoint", Subsystem: "leader_election", Name: "leading",
		Help:        "1 while this replica holds the lease, 0 once it stopped leading.",
		ConstLabels: prometheus.Labels{"identity": identity},
	}, []string{"lease"})}
	if err := reg.Register(m.leading); err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	return m, nil
}

func (m *metrics) set(lease string, leading bool) {
	if m == nil {
		return
	}
	v := 0.0
	if leading {
		v = 1
	}
	m.leading.WithLabelValues(lease).Set(v)
}
