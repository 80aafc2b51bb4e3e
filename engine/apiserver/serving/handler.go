package serving

import (
	"crypto/x509"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// API serves everything but /metrics; required.
	API http.Handler
	// Token is the admin bearer token; with none, only anonymous paths work.
	Token string
	// Authorizer decides every authenticated request (and impersonation);
	// nil lets only the group system:masters do anything.
	Authorizer authorizer.Authorizer
	// Authenticators are further bearer token authenticators (a static
	// token file, ServiceAccount tokens, OIDC ID tokens), asked in order
	// after the admin token; ClientCAs verify client certificates (CN the
	// user, O the groups). See AuthenticatorOptions.
	Authenticators []authenticator.Token
	ClientCAs      *x509.CertPool
	// Logger gets the request log; slog.Default when nil.
	Logger *slog.Logger
	// PublicPaths are served without a token besides the probes and
	// /version, with their subpaths: static files that hold no secrets, such
	// as the web UI's.
	PublicPaths []string
	// Metrics are recorded and served at /metrics; NewMetrics() when nil.
	Metrics *Metrics
	// Profiling serves Go's runtime profiles under /debug/pprof/ (to the
	// token's holder, like everything else), as kube-apiserver's
	// --profiling does.
	Profiling bool
	// Limits bounds the requests served at once and how long each may
	// take; see Limit.
	Limits LimitOptions
	// Served tells which resources the API serves, for the metrics'
	// resource label; see InstrumentOptions.Served.
	Served func(*request.RequestInfo) bool
	// Audit records the requests in the audit log; nothing when nil.
	Audit *Auditor
	// Detached, when not nil, lets long-running requests detach their
	// connection from their handler (see Detach), and ends those
	// connections when its Shutdown runs; without it every request is
	// served to its end by its handler.
	Detached *Detached
}

// pprofPrefix is where the runtime profiles are served.
const pprofPrefix = "/debug/pprof/"

// servePprof serves Go's profiles: the index, the named profiles (heap,
// goroutine, allocs, block, mutex, threadcreate), a CPU profile and an
// execution trace (?seconds=N), the command line and symbols.
func servePprof(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, pprofPrefix) {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r) // the index, and the named profiles by name
	}
}

// NewHandler puts the serving layers around the API: instrumentation (request
// info, panic recovery, metrics, logging) outermost, so that rejected requests
// are counted and logged too, then authentication, then audit (the requests
// authentication refuses are audited too), then impersonation, then the
// in-flight limits and the request timeout (after authentication, so that
// unauthenticated requests take no slot, as in kube-apiserver), then
// authorization, then /metrics and the API.
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
		if opts.Profiling && strings.HasPrefix(r.URL.Path, pprofPrefix) {
			servePprof(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
	authorized := Authorize(routes, opts.Authorizer, opts.Logger, opts.PublicPaths...)
	limited := withImpersonation(Limit(authorized, opts.Limits, m), opts.Authorizer)
	authn := NewAuthenticator(AuthenticatorOptions{
		Token: opts.Token, Tokens: opts.Authenticators, ClientCAs: opts.ClientCAs, Public: opts.PublicPaths, Logger: opts.Logger,
	})
	authenticated := authn.Wrap(opts.Audit.Wrap(limited))
	return growStackHTTP2(Instrument(opts.Audit.WrapAuthentication(authenticated), InstrumentOptions{Logger: opts.Logger, Metrics: m, Served: opts.Served, Detached: opts.Detached}))
}
