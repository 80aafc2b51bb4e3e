package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/setpoint-dev/setpoint/host"
)

// registerTierMetrics exports how the Wasm host's versions moved from the
// interpreter to compiled code (--plugin-interpreter-first).
func registerTierMetrics(reg prometheus.Registerer, h *host.Host) error {
	counter := func(name, help string, v func(host.TierStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(h.TierStats())) })
	}
	for _, c := range []prometheus.Collector{
		counter("setpoint_plugin_interpreted_loads_total",
			"Plugin versions loaded on wazero's interpreter while their module compiles in the background.",
			func(s host.TierStats) int64 { return s.Interpreted }),
		counter("setpoint_plugin_tier_switches_total",
			"Plugin versions that moved from the interpreter to compiled code.",
			func(s host.TierStats) int64 { return s.Switched }),
		counter("setpoint_plugin_tier_failures_total",
			"Background compiles that failed, leaving their plugin version on the interpreter.",
			func(s host.TierStats) int64 { return s.Failed }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
