package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestNewMetricsTwiceLeavesTheFirstIntact(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("second registration: no error")
	}
	m.forController("a").observe(result{}, 0)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 2 {
		t.Errorf("gathered %d families, want 2 (reconcile total and duration)", len(mfs))
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	m.forController("a").observe(result{}, 0)
	m.Delete("a")
	if m.queueProvider() != nil {
		t.Error("nil Metrics gives a queue provider")
	}
}
