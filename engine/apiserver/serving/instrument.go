package serving

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/felixge/httpsnoop"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// requestInfoFactory tells verbs and resources apart the way Kubernetes does.
var requestInfoFactory = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// note is what inner handlers tell the instrumenting one about a request.
type note struct {
	user   atomic.Pointer[string]
	served atomic.Bool
}

type noteKey struct{}

// noteUser records who the request authenticated as, for the request log.
func noteUser(ctx context.Context, name string) {
	if n, ok := ctx.Value(noteKey{}).(*note); ok {
		n.user.Store(&name)
	}
}

// MarkServed tells the instrumenting handler that the request named a
// resource the API serves: only those (these and what
// InstrumentOptions.Served accepts) get a resource label of their own in
// the metrics, others count under one "unknown" label, so that requests for
// made-up resources cannot use up the label's bounded values.
func MarkServed(ctx context.Context) {
	if n, ok := ctx.Value(noteKey{}).(*note); ok {
		n.served.Store(true)
	}
}

// InstrumentOptions configures Instrument.
type InstrumentOptions struct {
	// Logger gets one record per request; slog.Default when nil.
	Logger *slog.Logger
	// Metrics records each request; none when nil.
	Metrics *Metrics
	// Served tells whether a request names a resource the API serves, for
	// the resource label of the metrics (see MarkServed, which a handler
	// calls for the same purpose); when nil, only MarkServed counts.
	Served func(*request.RequestInfo) bool
	// Detached, when not nil, lets long-running requests detach their
	// connection from their handler (see Detach); their metrics and log
	// line then wait for the connection's end.
	Detached *Detached
}

// Instrument returns a handler that resolves the request's verb and resource
// (request.RequestInfoFrom works inside), recovers a panic in next into a 500
// Status, counts and times the request and logs it. Tokens never reach the
// log: only the method, the path (no query), the result and the user's name
// do.
func Instrument(next http.Handler, opts InstrumentOptions) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info, err := requestInfoFactory.NewRequestInfo(r)
		if err != nil {
			info = &request.RequestInfo{Verb: strings.ToLower(r.Method), Path: r.URL.Path}
		}
		n := &note{}
		ctx := request.WithRequestInfo(r.Context(), info)
		ctx = context.WithValue(ctx, noteKey{}, n)
		r = r.WithContext(ctx)
		if opts.Detached != nil && LongRunning(r) {
			ctx = withLifetime(ctx, opts.Detached)
			r = r.WithContext(ctx)
		}

		var code int
		var written int64
		var hijacked bool
		ww := httpsnoop.Wrap(w, httpsnoop.Hooks{
			WriteHeader: func(next httpsnoop.WriteHeaderFunc) httpsnoop.WriteHeaderFunc {
				return func(c int) {
					if code == 0 && c >= 200 || c == http.StatusSwitchingProtocols {
						code = c
					}
					next(c)
				}
			},
			Write: func(next httpsnoop.WriteFunc) httpsnoop.WriteFunc {
				return func(b []byte) (int, error) {
					if code == 0 {
						code = http.StatusOK
					}
					k, err := next(b)
					written += int64(k)
					return k, err
				}
			},
			ReadFrom: func(next httpsnoop.ReadFromFunc) httpsnoop.ReadFromFunc {
				return func(src io.Reader) (int64, error) {
					if code == 0 {
						code = http.StatusOK
					}
					k, err := next(src)
					written += k
					return k, err
				}
			},
			Hijack: func(next httpsnoop.HijackFunc) httpsnoop.HijackFunc {
				return func() (net.Conn, *bufio.ReadWriter, error) {
					c, rw, err := next()
					if err == nil {
						hijacked = true
					}
					return c, rw, err
				}
			},
		})

		if opts.Metrics != nil {
			opts.Metrics.inflight.Inc()
		}
		defer func() {
			rec := recover()
			if rec != nil && rec != http.ErrAbortHandler {
				log.ErrorContext(ctx, "handler panicked",
					"method", r.Method, "path", r.URL.Path,
					"panic", fmt.Sprint(rec), "stack", string(debug.Stack()))
				if code == 0 && !hijacked {
					WriteStatus(ww, http.StatusInternalServerError, "InternalError", "internal error")
				}
				code = http.StatusInternalServerError
			}
			if hijacked && code == 0 {
				code = http.StatusSwitchingProtocols
			}
			if code == 0 {
				code = http.StatusOK
			}
			// The record keeps the request's strings rather than the
			// request, which a detached connection would otherwise keep,
			// headers and all, for its whole life.
			rr := requestRecord{opts: &opts, log: log, ctx: ctx, start: start, info: info, n: n,
				method: r.Method, path: r.URL.Path, remote: r.RemoteAddr,
				code: code, written: &written, hijacked: hijacked}
			if lt, _ := ctx.Value(lifetimeKey{}).(*lifetime); lt != nil {
				// Detached, the request ends with its connection.
				kept := new(requestRecord)
				*kept = rr
				if !lt.later(kept.finish) {
					kept.finish()
				}
			} else {
				rr.finish()
			}
			if rec == http.ErrAbortHandler {
				panic(rec)
			}
		}()
		next.ServeHTTP(ww, r)
	})
}

// SlowRequest is how long a request that is not a watch may take before
// the request log records it at info rather than debug.
const SlowRequest = time.Second

// requestLevel is the level a request is logged at: every request at debug,
// so that a server at the default info level logs only what needs a look:
// server errors at error, refused requests (4xx but a read of an object
// that is not there, which polling clients make all day) and slow requests
// at info. Watches and upgraded connections are long by design.
func requestLevel(verb string, code int, d time.Duration, hijacked bool) slog.Level {
	switch {
	case code >= 500:
		return slog.LevelError
	case code == 404 && (verb == "get" || verb == "list" || verb == "watch"):
		return slog.LevelDebug
	case code >= 400:
		return slog.LevelInfo
	case d >= SlowRequest && verb != "watch" && !hijacked:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// healthPath reports whether path is a health endpoint (/healthz, /readyz,
// /livez, or one of their checks).
func healthPath(path string) bool {
	for _, p := range []string{"/healthz", "/readyz", "/livez"} {
		if rest, ok := strings.CutPrefix(path, p); ok && (rest == "" || rest[0] == '/') {
			return true
		}
	}
	return false
}

// requestRecord is what Instrument records of a request when it ends.
type requestRecord struct {
	opts                 *InstrumentOptions
	log                  *slog.Logger
	ctx                  context.Context
	start                time.Time
	info                 *request.RequestInfo
	n                    *note
	method, path, remote string
	code                 int
	written              *int64
	hijacked             bool
}

// finish counts and logs the request.
func (rr *requestRecord) finish() {
	opts, info := rr.opts, rr.info
	if opts.Metrics != nil {
		opts.Metrics.inflight.Dec()
	}
	d := time.Since(rr.start)
	if opts.Metrics != nil {
		served := rr.n.served.Load() || info.Resource != "" && opts.Served != nil && opts.Served(info)
		opts.Metrics.observe(info.Verb, info.Resource, info.Subresource, served, rr.code, d)
	}
	level := requestLevel(info.Verb, rr.code, d, rr.hijacked)
	if level == slog.LevelError && healthPath(rr.path) {
		// A probe's failing answer: the health endpoint logs which check
		// failed and why; a server still starting answers so a few times.
		level = slog.LevelInfo
	}
	if !rr.log.Enabled(rr.ctx, level) {
		return // most requests, at debug: no attributes to build
	}
	attrs := []slog.Attr{
		slog.String("method", rr.method),
		slog.String("path", rr.path),
		slog.String("verb", info.Verb),
		slog.Int("code", rr.code),
		slog.Int64("bytes", *rr.written),
		slog.Duration("duration", d),
		slog.String("remote", rr.remote),
	}
	if info.Resource != "" {
		attrs = append(attrs, slog.String("resource", info.Resource))
	}
	if info.Namespace != "" {
		attrs = append(attrs, slog.String("namespace", info.Namespace))
	}
	if info.Name != "" {
		attrs = append(attrs, slog.String("name", info.Name))
	}
	if u := rr.n.user.Load(); u != nil {
		attrs = append(attrs, slog.String("user", *u))
	}
	rr.log.LogAttrs(rr.ctx, level, "request", attrs...)
}
