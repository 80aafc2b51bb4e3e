package plugins

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestEgressMetrics: each call counts under its plugin, grant and status,
// a call no grant matched under host "none", and a deleted plugin's
// series go.
func TestEgressMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewEgressMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveEgress("dns", "https://api.example.com", "200", 3*time.Millisecond)
	m.ObserveEgress("dns", "https://api.example.com", "200", time.Millisecond)
	m.ObserveEgress("dns", "", "forbidden", 0)
	m.ObserveEgress("other", "http://127.0.0.1:9000", "timeout", time.Second)
	want := `
# HELP setpoint_plugin_egress_requests_total HTTP calls plugins made to the outside world, by plugin, grant (host) and status: the HTTP code, or why there was no response (forbidden, timeout, toolarge, tls, unavailable, badrequest).
# TYPE setpoint_plugin_egress_requests_total counter
setpoint_plugin_egress_requests_total{host="http://127.0.0.1:9000",plugin="other",status="timeout"} 1
setpoint_plugin_egress_requests_total{host="https://api.example.com",plugin="dns",status="200"} 2
setpoint_plugin_egress_requests_total{host="none",plugin="dns",status="forbidden"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "setpoint_plugin_egress_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.duration); n != 3 {
		t.Errorf("%d duration series, want 3", n)
	}
	m.Forget("dns")
	if n := testutil.CollectAndCount(m.requests); n != 1 {
		t.Errorf("%d request series after forgetting dns, want 1", n)
	}
	var nilMetrics *EgressMetrics
	nilMetrics.ObserveEgress("p", "", "200", 0) // records nothing, does not panic
	nilMetrics.Forget("p")
}
