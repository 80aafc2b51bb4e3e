package serving

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// maxResourceLabels caps the distinct values of the resource label: request
// paths come from clients, and a client must not be able to grow the metrics
// without bound. Only resources the API serves get a label of their own (see
// MarkServed), so this cap only matters on a server that has served more
// than this many kinds since it started; later ones count under "other".
const maxResourceLabels = 512

// unservedLabel is the resource label of requests for resources the API does
// not serve (made-up paths, kinds not yet registered): one value for all, so
// that a client cannot fill the label slots with names it makes up.
const unservedLabel = "unknown"

// otherLabel is the verb, resource or subresource label of requests whose
// value is past its bound or not one the server knows.
const otherLabel = "other"

// metricVerbs are the values of the verb label: the verbs of resource
// requests, and the methods of HTTP (lower case) for other paths, whose
// method is the verb. Others count as otherLabel: a method is any token a
// client sends.
var metricVerbs = map[string]bool{
	"": true, "get": true, "list": true, "watch": true, "create": true, "update": true, "patch": true,
	"delete": true, "deletecollection": true, "proxy": true,
	"head": true, "post": true, "put": true, "options": true, "connect": true, "trace": true,
}

// metricSubresources are the values of the subresource label: the
// subresources the API serves. Others count as otherLabel: the path names
// the subresource, and a request for a served resource is labelled even
// when it is refused before the API checks its subresource.
var metricSubresources = map[string]bool{"": true, "status": true, "scale": true, "finalize": true, "token": true}

// Metrics holds the API's request metrics and serves them.
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inflight prometheus.Gauge
	rejected *prometheus.CounterVec
	// rejectedBy, queued and queueWait are the in-flight limits' fair
	// queues: see Limit.
	rejectedBy *prometheus.CounterVec
	queued     *prometheus.GaugeVec
	queueWait  *prometheus.HistogramVec
	// shareWait and shareGauges are the fair share's: see fairShare.
	shareWait   *prometheus.HistogramVec
	shareGauges shareGauges

	mu        sync.Mutex // guards resources
	resources map[string]struct{}

	// series keeps the request counter and latency histogram of each
	// label set seen, so that a request finds both with one lookup rather
	// than hashing its labels into each vector; at most maxSeries of them,
	// requests past that use the vectors. Every label has bounded values
	// (observe), so that clients cannot fill it with made-up ones.
	series    sync.Map // seriesKey -> *requestSeries
	seriesLen atomic.Int64
}

// maxSeries bounds Metrics.series.
const maxSeries = 4096

type seriesKey struct {
	verb, resource, subresource string
	code                        int
}

type requestSeries struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

// NewMetrics returns request metrics registered in a registry of their own,
// together with the Go runtime and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint",
			Subsystem: "apiserver",
			Name:      "requests_total",
			Help:      "API requests by verb, resource, subresource and HTTP code.",
		}, []string{"verb", "resource", "subresource", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint",
			Subsystem: "apiserver",
			Name:      "request_duration_seconds",
			Help:      "API request latency by verb, resource, subresource and HTTP code; for watches, how long the watch lasted.",
			Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"verb", "resource", "subresource", "code"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "setpoint",
			Subsystem: "apiserver",
			Name:      "inflight_requests",
			Help:      "API requests being served, watches included.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint",
			Subsystem: "apiserver",
			Name:      "dropped_requests_total",
			Help:      "Requests answered 429 because their class (readOnly, mutating, watch) was at its in-flight limit; setpoint_apiserver_rejected_requests_total says why.",
		}, []string{"request_kind"}),
		rejectedBy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint",
			Subsystem: "apiserver",
			Name:      "rejected_requests_total",
			Help:      "Requests answered 429 by class and reason: concurrency-limit (every seat taken, no queuing), queue-full (the user's queue or all queues full), time-out (no seat within the queue wait timeout), cancelled (the request ended while it waited).",
		}, []string{"request_kind", "reason"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "setpoint",
			Subsystem: "apiserver",
			Name:      "queued_requests",
			Help:      "Requests waiting for an in-flight seat, by class (readOnly, mutating).",
		}, []string{"request_kind"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint",
			Subsystem: "apiserver",
			Name:      "queue_wait_seconds",
			Help:      "How long requests that found every in-flight seat of their class taken waited, by class and whether they got a seat in the end (execute).",
			Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"request_kind", "execute"}),
		shareWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint",
			Subsystem: "apiserver",
			Name:      "fair_share_wait_seconds",
			Help:      "How long reads and writes of a user holding its fair share of the in-flight budget (--fair-share-seats) waited while several users were active, by class and whether they went on in the end (execute).",
			Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"request_kind", "execute"}),
		shareGauges: shareGauges{
			waiting: prometheus.NewGauge(prometheus.GaugeOpts{
				Namespace: "setpoint",
				Subsystem: "apiserver",
				Name:      "fair_share_waiting_requests",
				Help:      "Reads and writes waiting because their user holds its fair share of the in-flight budget (--fair-share-seats).",
			}),
			active: prometheus.NewGauge(prometheus.GaugeOpts{
				Namespace: "setpoint",
				Subsystem: "apiserver",
				Name:      "fair_share_active_users",
				Help:      "Users among whom the in-flight budget (--fair-share-seats) is shared: with reads or writes in flight or waiting, or whose last one ended within a second; as of the last change of the fair share's state.",
			}),
		},
		resources: make(map[string]struct{}),
	}
	m.registry.MustRegister(m.requests, m.latency, m.inflight, m.rejected, m.rejectedBy, m.queued, m.queueWait,
		m.shareWait, m.shareGauges.waiting, m.shareGauges.active,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where the metrics live; other parts may register theirs.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// resourceLabel bounds the resource label's cardinality.
func (m *Metrics) resourceLabel(resource string) string {
	if resource == "" {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.resources[resource]; ok {
		return resource
	}
	if len(m.resources) >= maxResourceLabels {
		return otherLabel
	}
	m.resources[resource] = struct{}{}
	return resource
}

// observe records one request. served tells whether the API recognised the
// resource (MarkServed); others are labelled unservedLabel.
func (m *Metrics) observe(verb, resource, subresource string, served bool, code int, d time.Duration) {
	if resource != "" && !served {
		resource = unservedLabel
	}
	resource = m.resourceLabel(resource)
	if resource == "" || resource == otherLabel || resource == unservedLabel {
		subresource = ""
	} else if !metricSubresources[subresource] {
		subresource = otherLabel
	}
	if !metricVerbs[verb] {
		verb = otherLabel
	}
	k := seriesKey{verb, resource, subresource, code}
	rs, ok := m.series.Load(k)
	if !ok {
		c := strconv.Itoa(code)
		s := &requestSeries{
			count:   m.requests.WithLabelValues(verb, resource, subresource, c),
			latency: m.latency.WithLabelValues(verb, resource, subresource, c),
		}
		if m.seriesLen.Load() < maxSeries {
			if _, loaded := m.series.LoadOrStore(k, s); !loaded {
				m.seriesLen.Add(1)
			}
		}
		rs = s
	}
	s := rs.(*requestSeries)
	s.count.Inc()
	s.latency.Observe(d.Seconds())
}

// queuedGauge sets a gauge to a fair queue's number of waiting requests.
type queuedGauge struct{ g prometheus.Gauge }

func (q queuedGauge) queuedChanged(n int) { q.g.Set(float64(n)) }

// shareGauges set the fair share's gauges.
type shareGauges struct{ waiting, active prometheus.Gauge }

func (g shareGauges) shareChanged(waiting, active int) {
	g.waiting.Set(float64(waiting))
	g.active.Set(float64(active))
}
