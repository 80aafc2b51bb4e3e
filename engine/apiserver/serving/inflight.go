package serving

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Defaults of LimitOptions, kube-apiserver's where it has one.
const (
	// DefaultMaxRequestsInflight is kube-apiserver's --max-requests-inflight.
	DefaultMaxRequestsInflight = 400
	// DefaultMaxMutatingRequestsInflight is kube-apiserver's
	// --max-mutating-requests-inflight.
	DefaultMaxMutatingRequestsInflight = 200
	// DefaultMaxWatches bounds long-running requests (watches), which
	// kube-apiserver does not count against the limits above either.
	DefaultMaxWatches = 5000
	// DefaultRequestTimeout is kube-apiserver's --request-timeout.
	DefaultRequestTimeout = 60 * time.Second
	// retryAfterSeconds is what a 429 asks the client to wait, as
	// kube-apiserver's max-in-flight filter answers.
	retryAfterSeconds = 1
)

// LimitOptions bounds the requests the API serves at once. Zero values get
// the defaults above; a negative limit turns that limit off.
type LimitOptions struct {
	// MaxRequestsInflight bounds the reads (get, list and other GETs) being
	// served at once; further ones get 429 with Retry-After.
	MaxRequestsInflight int
	// MaxMutatingRequestsInflight bounds the writes being served at once.
	MaxMutatingRequestsInflight int
	// MaxWatches bounds the long-running requests (watches, followed logs)
	// open at once; they count against neither limit above.
	MaxWatches int
	// RequestTimeout bounds every request but the long-running ones: its
	// context ends then, and writes to the client fail from then on.
	RequestTimeout time.Duration
	// LongerTimeout, when set, gives the requests it returns a duration for
	// that timeout instead of RequestTimeout (module uploads, whose compile
	// has a deadline of its own).
	LongerTimeout func(*http.Request) time.Duration
	// WatchWriteTimeout is how long one event of a long-running request
	// may take to reach the client before the request is ended, so that a
	// client that stops reading holds nothing for long; the handler reads
	// it with WatchWriteTimeout. DefaultWatchWriteTimeout when zero.
	WatchWriteTimeout time.Duration
}

// DefaultWatchWriteTimeout is LimitOptions.WatchWriteTimeout's default, the
// write timeout of WebSocket watches.
const DefaultWatchWriteTimeout = 10 * time.Second

type watchWriteKey struct{}

// WatchWriteTimeout returns the LimitOptions.WatchWriteTimeout of a
// long-running request served through Limit.
func WatchWriteTimeout(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(watchWriteKey{}).(time.Duration)
	return d, ok
}

func (o *LimitOptions) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxRequestsInflight, DefaultMaxRequestsInflight)
	def(&o.MaxMutatingRequestsInflight, DefaultMaxMutatingRequestsInflight)
	def(&o.MaxWatches, DefaultMaxWatches)
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.WatchWriteTimeout <= 0 {
		o.WatchWriteTimeout = DefaultWatchWriteTimeout
	}
}

// longRunningSubresources are the subresources kube-apiserver's
// BasicLongRunningRequestCheck treats as long-running besides watches.
var longRunningSubresources = map[string]bool{
	"log": true, "exec": true, "attach": true, "portforward": true, "proxy": true,
}

// LongRunning tells whether a request may stay open indefinitely: a watch,
// or a streaming subresource. It reads the RequestInfo Instrument put in the
// context.
func LongRunning(r *http.Request) bool {
	info, ok := request.RequestInfoFrom(r.Context())
	if !ok {
		return false
	}
	return info.Verb == "watch" || info.IsResourceRequest && longRunningSubresources[info.Subresource]
}

// mutating tells a write from a read, as kube-apiserver's max-in-flight
// filter does: get, list and watch read, every other verb writes.
func mutating(r *http.Request) bool {
	info, ok := request.RequestInfoFrom(r.Context())
	if !ok {
		return r.Method != http.MethodGet && r.Method != http.MethodHead
	}
	switch info.Verb {
	case "get", "list", "watch", "head":
		return false
	}
	return true
}

// limiter holds the in-flight slots, one buffered channel per class: a send
// takes a slot, a receive gives it back.
type limiter struct {
	reads, writes, watches chan struct{}
	timeout, watchWrite    time.Duration
	longer                 func(*http.Request) time.Duration
	metrics                *Metrics
}

func slots(n int) chan struct{} {
	if n < 0 {
		return nil
	}
	return make(chan struct{}, n)
}

// Limit returns a handler that serves at most opts' number of requests of
// each class at once and answers the others 429 Too Many Requests with
// Retry-After at once, as kube-apiserver's max-in-flight filter does (it
// does not queue: a client retries, and a queue would hold the memory of
// the requests it keeps). Probes and /version are not limited, so that a
// saturated server still tells its supervisor it is alive. Requests other
// than long-running ones get a context that ends after RequestTimeout, and
// the same write deadline, so that neither a slow handler nor a client that
// stops reading holds its slot (and what the request has built) longer.
// Limit must run inside Instrument, which puts the RequestInfo it reads in
// the context.
func Limit(next http.Handler, opts LimitOptions, m *Metrics) http.Handler {
	opts.setDefaults()
	l := &limiter{
		reads:      slots(opts.MaxRequestsInflight),
		writes:     slots(opts.MaxMutatingRequestsInflight),
		watches:    slots(opts.MaxWatches),
		timeout:    opts.RequestTimeout,
		watchWrite: opts.WatchWriteTimeout,
		longer:     opts.LongerTimeout,
		metrics:    m,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Anonymous(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		long := LongRunning(r)
		var class chan struct{}
		var name string
		switch {
		case long:
			class, name = l.watches, "watch"
		case mutating(r):
			class, name = l.writes, "mutating"
		default:
			class, name = l.reads, "readOnly"
		}
		if class != nil {
			select {
			case class <- struct{}{}:
				defer func() { <-class }()
			default:
				if l.metrics != nil {
					l.metrics.rejected.WithLabelValues(name).Inc()
				}
				tooManyRequests(w)
				return
			}
		}
		if long {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), watchWriteKey{}, l.watchWrite)))
			return
		}
		timeout := l.timeout
		if l.longer != nil && timeout > 0 {
			timeout = max(timeout, l.longer(r))
		}
		if timeout <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		deadline := time.Now().Add(timeout)
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		defer cancel()
		rc := http.NewResponseController(w)
		if rc.SetWriteDeadline(deadline) == nil {
			// The connection outlives the request under keep-alive.
			defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// tooManyRequests answers 429 as kube-apiserver's max-in-flight filter does.
func tooManyRequests(w http.ResponseWriter) {
	body, _ := json.Marshal(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  "Too many requests, please try again later.",
		Reason:   metav1.StatusReasonTooManyRequests,
		Details:  &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds},
		Code:     http.StatusTooManyRequests,
	})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
}
