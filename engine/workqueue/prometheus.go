package workqueue

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// PrometheusProvider records queue metrics as Prometheus collectors labelled
// by queue name, under the setpoint_workqueue_ prefix.
type PrometheusProvider struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	retries        *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinishedWork *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
}

var _ MetricsProvider = (*PrometheusProvider)(nil)

// NewPrometheusProvider creates the collectors and registers them with reg.
// Registering twice with one registry is an error, and then nothing stays
// registered.
func NewPrometheusProvider(reg prometheus.Registerer) (*PrometheusProvider, error) {
	const ns, sub = "setpoint", "workqueue"
	label := []string{"name"}
	buckets := prometheus.ExponentialBuckets(1e-6, 10, 11) // 1 µs to 1000 s
	p := &PrometheusProvider{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "depth",
			Help: "Keys waiting in the work queue."}, label),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "adds_total",
			Help: "Keys added to the work queue."}, label),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retries_total",
			Help: "Keys re-added after a failure, with backoff."}, label),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "queue_duration_seconds",
			Help: "How long a key waits in the work queue before a worker takes it.", Buckets: buckets}, label),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "work_duration_seconds",
			Help: "How long a worker holds a key.", Buckets: buckets}, label),
		unfinishedWork: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "unfinished_work_seconds",
			Help: "Sum of the time held keys have been held so far."}, label),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "longest_running_processor_seconds",
			Help: "How long the longest-held key has been held."}, label),
	}
	var errs []error
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{p.depth, p.adds, p.retries, p.latency, p.workDuration, p.unfinishedWork, p.longestRunning} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, c)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, c := range done {
			reg.Unregister(c)
		}
		return nil, fmt.Errorf("workqueue: register metrics: %w", err)
	}
	return p, nil
}

// Unregister removes the provider's collectors from reg.
func (p *PrometheusProvider) Unregister(reg prometheus.Registerer) {
	for _, c := range []prometheus.Collector{p.depth, p.adds, p.retries, p.latency, p.workDuration, p.unfinishedWork, p.longestRunning} {
		reg.Unregister(c)
	}
}

// NewMetrics implements MetricsProvider.
func (p *PrometheusProvider) NewMetrics(name string) Metrics {
	return Metrics{
		Depth:          p.depth.WithLabelValues(name),
		Adds:           p.adds.WithLabelValues(name),
		Retries:        p.retries.WithLabelValues(name),
		Latency:        p.latency.WithLabelValues(name),
		WorkDuration:   p.workDuration.WithLabelValues(name),
		UnfinishedWork: p.unfinishedWork.WithLabelValues(name),
		LongestRunning: p.longestRunning.WithLabelValues(name),
	}
}

// Delete drops the series of the queue name, for a controller that was
// removed.
func (p *PrometheusProvider) Delete(name string) {
	for _, v := range []interface{ DeleteLabelValues(...string) bool }{
		p.depth, p.adds, p.retries, p.latency, p.workDuration, p.unfinishedWork, p.longestRunning,
	} {
		v.DeleteLabelValues(name)
	}
}
