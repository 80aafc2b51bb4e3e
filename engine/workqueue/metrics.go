package workqueue

// Gauge is a value that goes up and down.
type Gauge interface {
	Inc()
	Dec()
}

// Counter only goes up.
type Counter interface{ Inc() }

// Observer records samples, in seconds for durations.
type Observer interface{ Observe(float64) }

// Setter holds the last value set.
type Setter interface{ Set(float64) }

// Metrics are the instruments of one queue. A nil field records nothing.
type Metrics struct {
	// Depth is the number of keys waiting to be handed out.
	Depth Gauge
	// Adds counts the keys added (not counting duplicates).
	Adds Counter
	// Retries counts AddRateLimited calls.
	Retries Counter
	// Latency observes how long keys waited between Add and Get, in seconds.
	Latency Observer
	// WorkDuration observes how long keys were held, Get to Done, in seconds.
	WorkDuration Observer
	// UnfinishedWork is the sum of the time every held key has been held.
	UnfinishedWork Setter
	// LongestRunning is the time the longest-held key has been held.
	LongestRunning Setter
}

// MetricsProvider makes the instruments of a queue from its name.
type MetricsProvider interface {
	NewMetrics(name string) Metrics
}

// MetricsProviderFunc adapts a function to MetricsProvider.
type MetricsProviderFunc func(name string) Metrics

// NewMetrics implements MetricsProvider.
func (f MetricsProviderFunc) NewMetrics(name string) Metrics { return f(name) }

type noop struct{}

func (noop) Inc()            {}
func (noop) Dec()            {}
func (noop) Observe(float64) {}
func (noop) Set(float64)     {}

func noMetrics() Metrics { return Metrics{}.withDefaults() }

func (m Metrics) withDefaults() Metrics {
	if m.Depth == nil {
		m.Depth = noop{}
	}
	if m.Adds == nil {
		m.Adds = noop{}
	}
	if m.Retries == nil {
		m.Retries = noop{}
	}
	if m.Latency == nil {
		m.Latency = noop{}
	}
	if m.WorkDuration == nil {
		m.WorkDuration = noop{}
	}
	if m.UnfinishedWork == nil {
		m.UnfinishedWork = noop{}
	}
	if m.LongestRunning == nil {
		m.LongestRunning = noop{}
	}
	return m
}
