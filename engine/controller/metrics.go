package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/setpoint-dev/setpoint/engine/workqueue"
)

// Metrics are the Prometheus collectors of every controller: the work queue
// metrics (setpoint_workqueue_*) and reconcile counts and durations
// (setpoint_controller_*), labelled by controller name.
type Metrics struct {
	queue      *workqueue.PrometheusProvider
	reconciles *prometheus.CounterVec
	duration   *prometheus.HistogramVec
}

// NewMetrics creates the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	q, err := workqueue.NewPrometheusProvider(reg)
	if err != nil {
		return nil, err
	}
	m := &Metrics{
		queue: q,
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "controller", Name: "reconcile_total",
			Help: "Reconciles by controller and result (success, error, terminal, skipped).",
		}, []string{"controller", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint", Subsystem: "controller", Name: "reconcile_duration_seconds",
			Help:    "How long one reconcile takes, plugin call and writes included.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 12),
		}, []string{"controller"}),
	}
	var errs []error
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{m.reconciles, m.duration} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, c)
		}
	}
	if err := errors.Join(errs...); err != nil {
		// Unregistering goes by descriptor: only what this call registered.
		q.Unregister(reg)
		for _, c := range done {
			reg.Unregister(c)
		}
		return nil, fmt.Errorf("controller: register metrics: %w", err)
	}
	return m, nil
}

func (m *Metrics) queueProvider() workqueue.MetricsProvider {
	if m == nil {
		return nil
	}
	return m.queue
}

// Delete drops the series of a removed controller.
func (m *Metrics) Delete(name string) {
	if m == nil {
		return
	}
	m.queue.Delete(name)
	m.reconciles.DeletePartialMatch(prometheus.Labels{"controller": name})
	m.duration.DeleteLabelValues(name)
}

// controllerMetrics are one controller's series; nil records nothing.
type controllerMetrics struct {
	results  map[string]prometheus.Counter
	duration prometheus.Observer
}

func (m *Metrics) forController(name string) *controllerMetrics {
	if m == nil {
		return nil
	}
	cm := &controllerMetrics{results: make(map[string]prometheus.Counter), duration: m.duration.WithLabelValues(name)}
	for _, o := range []string{outcomeSuccess, outcomeError, outcomeTerminal, outcomeSkipped} {
		cm.results[o] = m.reconciles.WithLabelValues(name, o)
	}
	return cm
}

func (cm *controllerMetrics) observe(res result, d time.Duration) {
	if cm == nil {
		return
	}
	cm.results[res.outcome()].Inc()
	cm.duration.Observe(d.Seconds())
}
