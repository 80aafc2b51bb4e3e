package serving

import (
	"log/slog"
	"net/http"
)

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// API serves everything but /metrics; required.
	API http.Handler
	// Token is the admin bearer token; with none, only anonymous paths work.
	Token string
	// Logger gets the request log; slog.Default when nil.
	Logger *slog.Logger
	// PublicPaths are served without a token besides the probes and
	// /version, with their subpaths: static files that hold no secrets, such
	// as the web UI's.
	PublicPaths []string
	// Metrics are recorded and served at /metrics; NewMetrics() when nil.
	Metrics *Metrics
}

// NewHandler puts the serving layers around the API: instrumentation (request
// info, panic recovery, metrics, logging) outermost, so that rejected requests
// are counted and logged too, then authentication, then /metrics and the API.
func NewHandler(opts HandlerOptions) http.Handler {
	m := opts.Metrics
	if m == nil {
		m = NewMetrics()
	}
	metrics := m.Handler()
	api := opts.API
	routes := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				WriteStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "only GET is allowed on /metrics")
				return
			}
			metrics.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
	return Instrument(NewAuthenticator(opts.Token, opts.PublicPaths...).Wrap(routes), InstrumentOptions{Logger: opts.Logger, Metrics: m})
}
