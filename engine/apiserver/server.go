package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/engine/apiserver/webui"
	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
)

// DefaultMaxBodyBytes caps request bodies: larger ones get 413. It is twice
// the default object bound (engine.DefaultMaxObjectBytes), kube-apiserver's
// 3 MiB; a server with another object bound takes bodies of twice that.
const DefaultMaxBodyBytes = 2 * engine.DefaultMaxObjectBytes

// MaxDepth caps the nesting of JSON and YAML request bodies: deeper ones get
// 400. It is the engine's bound on the objects a patch makes
// (engine.MaxNestingDepth).
const MaxDepth = engine.MaxNestingDepth

// Options configures New. Zero values get defaults.
type Options struct {
	// Engine is the object service to serve; required. The caller builds
	// it and runs its loops (engine.Service.Run): the server only serves it.
	Engine *engine.Service
	// Routes are more handlers behind the server's router and its
	// middleware (panic recovery, warnings), for paths the engine does not
	// serve; see Route.
	Routes []Route
	// Registerer, when set, gets the server's own metrics (the watches it
	// closed for slow clients).
	Registerer prometheus.Registerer
	// Logger receives the server's logs; slog.Default() when nil.
	Logger *slog.Logger
	// AllowedOrigins are the browser origins, besides the server's own, that
	// may open a WebSocket watch.
	AllowedOrigins []string
	// MaxBodyBytes caps request bodies; twice the engine's object bound
	// (DefaultMaxBodyBytes by default) when zero.
	MaxBodyBytes int64
	// Version is what /version reports.
	Version version.Info
	// WatchWriteTimeout is how long one event of a watch over plain HTTP
	// may take to reach the client before the watch is ended;
	// DefaultWatchWriteTimeout when zero. serving.Limit's setting, when the
	// request went through it, takes precedence. WebSocket watches have
	// their own bounds (wswatch.Options).
	WatchWriteTimeout time.Duration
	// Authorizer answers the access reviews (SubjectAccessReview and the
	// others) and decides whether server-side apply may create, behind the
	// group system:masters as serving.Decider chains them; when it is also
	// an authorizer.RuleResolver, SelfSubjectRulesReview lists its rules.
	// nil lets only system:masters do anything, as serving.Authorize does.
	Authorizer authorizer.Authorizer
	// ReadyChecks are more checks of /readyz (and /healthz), each also
	// served on its own: the start-up work a request may depend on, as
	// kube-apiserver's post-start hooks (poststarthook/rbac/bootstrap-roles).
	ReadyChecks []HealthCheck
}

// HealthCheck is a named check of a health endpoint: Check answers nil
// when it passes. Its error is logged, never shown.
type HealthCheck struct {
	Name  string
	Check func(context.Context) error
}

// Route is a handler served on the server's router: Pattern is a chi
// pattern ("/apis/example.dev/v1/things", ".../things/*",
// ".../things/{name}/log") and takes precedence over the resource paths it
// overlaps, as a static path segment does over a parameter in chi. The
// handler serves every method; it answers those it does not take itself.
type Route struct {
	Pattern string
	Handler http.Handler
}

// DefaultWatchWriteTimeout is Options.WatchWriteTimeout's default.
const DefaultWatchWriteTimeout = serving.DefaultWatchWriteTimeout

var _ http.Handler = (*Server)(nil)

// Server is the API handler. It is safe for concurrent use.
type Server struct {
	eng    *engine.Service
	log    *slog.Logger
	opts   Options
	router chi.Router
	ws     *wswatch.Server
	// slowClosed counts the watches ended for their client's slowness.
	slowClosed *prometheus.CounterVec

	// pageSize is how many objects a full list reads at a time
	// (engine.ListJSONPageSize; tests lower it).
	pageSize int64

	// authz decides the access reviews and apply's creates
	// (serving.Decider of Options.Authorizer); rules lists a user's rules
	// for SelfSubjectRulesReview, nil when the authorizer cannot.
	authz authorizer.Authorizer
	rules authorizer.RuleResolver

	openapiMu sync.Mutex // guards openapi
	openapi   *openapiCache
}

// buildVCS returns the commit, tree state ("clean" or "dirty") and commit
// time the Go toolchain stamped into the binary, as /version reports them;
// empty when the binary was built without version control information.
func buildVCS() (commit, treeState, date string) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", "", ""
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			date = s.Value
		case "vcs.modified":
			treeState = "clean"
			if s.Value == "true" {
				treeState = "dirty"
			}
		}
	}
	return commit, treeState, date
}

// New returns the API handler over opts.Engine.
func New(opts Options) (*Server, error) {
	eng := opts.Engine
	if eng == nil {
		return nil, errors.New("apiserver: Options.Engine is required")
	}
	for _, rt := range opts.Routes {
		if !strings.HasPrefix(rt.Pattern, "/") || rt.Handler == nil {
			return nil, fmt.Errorf("apiserver: route %q: want a pattern beginning with / and a handler", rt.Pattern)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Version.GitVersion == "" {
		opts.Version = version.Info{
			Major: "1", Minor: "32", GitVersion: "v1.32.0-setpoint",
			GoVersion: runtime.Version(), Compiler: runtime.Compiler,
			Platform: runtime.GOOS + "/" + runtime.GOARCH,
		}
		opts.Version.GitCommit, opts.Version.GitTreeState, opts.Version.BuildDate = buildVCS()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 2 * int64(eng.MaxObjectBytes())
	}
	if opts.WatchWriteTimeout <= 0 {
		opts.WatchWriteTimeout = DefaultWatchWriteTimeout
	}
	ws, err := wswatch.New(wswatch.Options{AllowedOrigins: opts.AllowedOrigins, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	s := &Server{eng: eng, log: opts.Logger, opts: opts, ws: ws, pageSize: engine.ListJSONPageSize, slowClosed: newSlowWatchesClosed()}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(s.slowClosed); err != nil {
			return nil, fmt.Errorf("apiserver: %w", err)
		}
	}
	s.authz = serving.Decider(opts.Authorizer)
	s.rules, _ = opts.Authorizer.(authorizer.RuleResolver)
	s.router = s.routes()
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// healthChecks are what endpoint (healthz, readyz or livez) checks, each
// also served on its own (/readyz/store), as Kubernetes names its checks:
// the server's own, then, but for livez, Options.ReadyChecks. A start-up
// check failing must not make a liveness probe restart the server, as in
// kube-apiserver, whose /livez gives its post-start hooks a grace period.
func (s *Server) healthChecks(endpoint string) []HealthCheck {
	checks := []HealthCheck{
		{"ping", func(context.Context) error { return nil }},
		{"store", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
			defer cancel()
			return s.eng.CheckStore(ctx)
		}},
	}
	if endpoint == "livez" {
		return checks
	}
	return append(checks, s.opts.ReadyChecks...)
}

// healthCheckTimeout bounds a health check's wait for the store, as
// kube-apiserver's --etcd-healthcheck-timeout (2 s) does: a probe must get
// an answer before its own timeout, not the store client's request timeout.
const healthCheckTimeout = 2 * time.Second

// serveHealth answers a health endpoint the way kube-apiserver does: "ok", or
// 500 naming the failed checks (their reasons are logged, not shown, since
// the endpoint needs no token); with ?verbose one line per check. only
// limits it to one check.
func (s *Server) serveHealth(endpoint, only string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var out strings.Builder
		failed := false
		for _, c := range s.healthChecks(endpoint) {
			if only != "" && c.Name != only {
				continue
			}
			if err := c.Check(r.Context()); err != nil {
				failed = true
				s.log.Warn("health check failed", "endpoint", endpoint, "check", c.Name, "err", err)
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
			} else {
				fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch {
		case failed:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", out.String(), endpoint)
		case r.URL.Query().Has("verbose") && only == "":
			fmt.Fprintf(w, "%s%s check passed\n", out.String(), endpoint)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}
}

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(recoverPanics(s.log), recordWarnings, routeDecodedPath)
	for _, name := range []string{"healthz", "readyz", "livez"} {
		r.Get("/"+name, s.serveHealth(name, ""))
		for _, c := range s.healthChecks(name) {
			r.Get("/"+name+"/"+c.Name, s.serveHealth(name, c.Name))
		}
	}
	r.Get("/version", func(w http.ResponseWriter, r *http.Request) { writeIndentedJSON(w, s.opts.Version) })
	r.Get("/api", s.serveCoreVersions)
	r.Get("/apis", s.serveGroups)
	r.Get("/apis/{group}", s.serveGroup)
	r.Get("/openapi/v2", s.serveOpenAPIV2)
	r.Get("/openapi/v3", s.serveOpenAPIV3Index)
	r.Get("/openapi/v3/*", s.serveOpenAPIV3)
	ui := webui.New()
	r.Handle(webui.Prefix+"*", ui)
	r.Handle("/ui", ui)
	for path, serve := range s.reviewHandlers() {
		r.HandleFunc(path, serve)
	}
	for _, rt := range s.opts.Routes {
		r.Handle(rt.Pattern, rt.Handler)
	}
	r.HandleFunc("/api/{version}", s.serveResourceList)
	r.HandleFunc("/api/{version}/*", s.serveResource)
	r.HandleFunc("/apis/{group}/{version}", s.serveResourceList)
	r.HandleFunc("/apis/{group}/{version}/*", s.serveResource)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("%s is not supported here", r.Method))
	})
	return r
}

// routeDecodedPath routes r on its decoded path, as kube-apiserver reads a
// request's path and as the authorizer read it (RequestInfo): chi would
// route on the escaped path where the client escaped a byte it need not
// have, so that .../clusterroles/system%3Aview named "system%3Aview", an
// object that cannot exist, and got a 404 for the one that does.
func routeDecodedPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePath == "" && r.URL.RawPath != "" {
			rctx.RoutePath = r.URL.Path
		}
		next.ServeHTTP(w, r)
	})
}

// recoverPanics turns a panic in a handler into a 500 Status.
func recoverPanics(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					log.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
					writeStatus(w, http.StatusInternalServerError, "InternalError", "internal error")
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// recordWarnings lets the engine add Warning headers to the response.
func recordWarnings(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &headerWarnings{h: w.Header()}
		next.ServeHTTP(w, r.WithContext(warning.WithWarningRecorder(r.Context(), rec)))
	})
}

// headerWarnings adds warnings as RFC 7234 Warning headers, as Kubernetes
// does (apimachinery's NewWarningHeader, which client-go parses); it keeps
// at most maxWarnings, and drops a text no header can carry, as
// kube-apiserver's recorder does.
type headerWarnings struct {
	mu   sync.Mutex
	h    http.Header
	seen map[string]bool
}

const maxWarnings = 50

func (hw *headerWarnings) AddWarning(_, text string) {
	header, err := utilnet.NewWarningHeader(299, "-", text)
	if err != nil || text == "" {
		return
	}
	hw.mu.Lock()
	defer hw.mu.Unlock()
	if hw.seen == nil {
		hw.seen = map[string]bool{}
	}
	if hw.seen[text] || len(hw.seen) >= maxWarnings {
		return
	}
	hw.seen[text] = true
	hw.h.Add("Warning", header)
}
