package serving

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
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
	// DefaultMaxQueuedRequestsPerUser is kube-apiserver's priority and
	// fairness queue length limit.
	DefaultMaxQueuedRequestsPerUser = 50
	// DefaultMaxQueuedRequests bounds the requests waiting for a seat in
	// each class, all users together.
	DefaultMaxQueuedRequests = 1000
	// DefaultQueueWaitTimeout is a quarter of DefaultRequestTimeout, as
	// kube-apiserver's priority and fairness bounds a request's wait.
	DefaultQueueWaitTimeout = 15 * time.Second
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
	// MaxQueuedRequestsPerUser bounds, in each of the two classes above,
	// the requests of one user that wait for a seat once every seat is
	// taken; a negative value turns queuing off, so that such a request
	// gets 429 at once. Users are told apart by name (request.UserFrom);
	// requests without a user share one queue.
	MaxQueuedRequestsPerUser int
	// MaxQueuedRequests bounds the requests waiting in each class, all
	// users together; negative for no bound but the one per user.
	MaxQueuedRequests int
	// QueueWaitTimeout bounds how long a request waits for a seat, or for
	// its fair share, before it gets 429.
	QueueWaitTimeout time.Duration
	// FairShareSeats is the budget of reads and writes in flight, all
	// users together, past which a user holding its fair share of it
	// (FairShareSeats / active users) waits while users under theirs go on
	// (see fairShare); a lone user is never held back. Zero for
	// DefaultFairShareSeats, negative to turn it off.
	FairShareSeats int
	// RequestTimeout bounds every request but the long-running ones: its
	// context ends then, and writes to the client fail a little later
	// (statusGrace), once a handler stopped by it could answer 504.
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
	def(&o.MaxQueuedRequestsPerUser, DefaultMaxQueuedRequestsPerUser)
	def(&o.MaxQueuedRequests, DefaultMaxQueuedRequests)
	def(&o.FairShareSeats, DefaultFairShareSeats())
	if o.QueueWaitTimeout <= 0 {
		o.QueueWaitTimeout = DefaultQueueWaitTimeout
	}
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

// Request classes, the request_kind label of the metrics (kube-apiserver's
// names).
const (
	classReadOnly = "readOnly"
	classMutating = "mutating"
	classWatch    = "watch"
)

// limiter holds the in-flight seats: a fair queue for reads and one for
// writes, and for watches, which never wait, a buffered channel (a send
// takes a seat, a receive gives it back). A nil one is no limit.
type limiter struct {
	reads, writes       *fairQueue
	share               *fairShare
	watches             chan struct{}
	timeout, watchWrite time.Duration
	longer              func(*http.Request) time.Duration
	metrics             *Metrics
}

func (l *limiter) queue(class string, opts LimitOptions, seats int) *fairQueue {
	if seats < 0 {
		return nil
	}
	var o queueObserver
	if l.metrics != nil {
		o = queuedGauge{l.metrics.queued.WithLabelValues(class)}
	}
	return newFairQueue(seats, opts.MaxQueuedRequestsPerUser, opts.MaxQueuedRequests, opts.QueueWaitTimeout, o)
}

// reject answers 429 and counts why.
func (l *limiter) reject(w http.ResponseWriter, class, reason string) {
	if l.metrics != nil {
		l.metrics.rejected.WithLabelValues(class).Inc()
		l.metrics.rejectedBy.WithLabelValues(class, reason).Inc()
	}
	tooManyRequests(w)
}

// userName is whom a request is queued as: its user's name, or "" for
// requests without a user.
func userName(ctx context.Context) string {
	if u, ok := request.UserFrom(ctx); ok && u != nil {
		return u.GetName()
	}
	return ""
}

// privileged tells whether the request's user is in the group
// system:masters, whom kube-apiserver's priority and fairness puts in the
// exempt priority level: never queued, never refused for concurrency.
func privileged(ctx context.Context) bool {
	u, ok := request.UserFrom(ctx)
	return ok && u != nil && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup)
}

// Limit returns a handler that serves at most opts' number of requests of
// each class (reads, writes, long-running ones) at once. A read or a write
// that finds every seat of its class taken waits in its user's queue, and a
// seat given back goes to the next user in turn (see fairQueue), so that a
// user who sends many requests at once gets no more of the seats than one
// who sends a few; a request whose queue is full, or that waits longer than
// QueueWaitTimeout, gets 429 Too Many Requests with Retry-After, as
// kube-apiserver's priority and fairness answers. Long-running requests
// never wait: past MaxWatches they get 429 at once. Probes and /version are
// not limited, so that a saturated server still tells its supervisor it is
// alive, and neither are the requests of the group system:masters (the
// exempt priority level of kube-apiserver's priority and fairness, after
// impersonation as there), so that an administrator can act on a server
// other users flood; they still get the request timeout. Requests other
// than long-running ones get a context that ends after RequestTimeout from
// when they got their seat, and a write deadline a little later
// (statusGrace, time to write a 504 Timeout), so that neither a slow
// handler nor a client that stops reading holds its seat (and what the request has built) longer. Once it has its
// seat, a read or write passes the fair share (see fairShare), which, once
// FairShareSeats requests run and several users are active, holds back a
// user already holding its share of them, so that the others' requests do
// not share the CPU with all of that user's; one that waits there keeps
// its seat, and what waits in the queues for a seat counts for no share.
// Limit must run
// inside Instrument, which puts the RequestInfo it reads in the context,
// and after authentication, which puts the user there.
func Limit(next http.Handler, opts LimitOptions, m *Metrics) http.Handler {
	opts.setDefaults()
	l := &limiter{
		timeout:    opts.RequestTimeout,
		watchWrite: opts.WatchWriteTimeout,
		longer:     opts.LongerTimeout,
		metrics:    m,
	}
	l.reads = l.queue(classReadOnly, opts, opts.MaxRequestsInflight)
	l.writes = l.queue(classMutating, opts, opts.MaxMutatingRequestsInflight)
	if opts.FairShareSeats > 0 {
		var o fairShareObserver
		if m != nil {
			o = m.shareGauges
		}
		l.share = newFairShare(opts.FairShareSeats, opts.QueueWaitTimeout, o)
	}
	if opts.MaxWatches >= 0 {
		l.watches = make(chan struct{}, opts.MaxWatches)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Anonymous(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		exempt := privileged(r.Context())
		if LongRunning(r) {
			if l.watches != nil && !exempt {
				select {
				case l.watches <- struct{}{}:
					// A detached connection keeps its slot until it ends.
					defer afterRequest(r.Context(), func() { <-l.watches })
				default:
					l.reject(w, classWatch, reasonConcurrencyLimit)
					return
				}
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), watchWriteKey{}, l.watchWrite)))
			return
		}
		q, class := l.reads, classReadOnly
		if mutating(r) {
			q, class = l.writes, classMutating
		}
		user := userName(r.Context())
		if exempt {
			q = nil
		}
		if q != nil {
			a := q.acquire(r.Context(), user)
			if a.queued && l.metrics != nil {
				l.metrics.queueWait.WithLabelValues(class, strconv.FormatBool(a.rejected == "")).Observe(a.waited.Seconds())
			}
			if a.rejected != "" {
				l.reject(w, class, a.rejected)
				return
			}
			defer q.release()
		}
		if l.share != nil && !exempt {
			a := l.share.acquire(r.Context(), user)
			if a.queued && l.metrics != nil {
				l.metrics.shareWait.WithLabelValues(class, strconv.FormatBool(a.rejected == "")).Observe(a.waited.Seconds())
			}
			if a.rejected != "" {
				l.reject(w, class, a.rejected)
				return
			}
			defer l.share.release(user)
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
		if r.ProtoMajor >= 2 {
			defer cutStreamAt(rc, deadline.Add(statusGrace(timeout))).stop()
		} else if rc.SetWriteDeadline(deadline.Add(statusGrace(timeout))) == nil {
			// A body still arriving at the deadline is cut there: the
			// context's end does not stop a read, and a client sending
			// its body a byte at a time would hold its seat for as long
			// as it liked. (Over HTTP/2 the stream's cut ends the read.)
			// It is left set: net/http clears it once the body is read
			// (and its read for the connection's end begins) and sets its
			// own for the next request, and a body still unread when the
			// handler returns, which net/http reads to its end before it
			// answers, must not hold the 504 back. A request without a
			// body sets none: that read has begun already, and a deadline
			// would end it, and the request's context, as if the client
			// had gone; for the same reason (a body read whole before
			// Limit, by the audit) the read deadline falls after the
			// context's, so that a handler still running sees its
			// timeout first.
			if r.Body != nil && r.Body != http.NoBody {
				_ = rc.SetReadDeadline(deadline.Add(statusGrace(timeout) / 2))
			}
			// The connection outlives the request under keep-alive.
			defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// streamCut resets an HTTP/2 stream whose handler is still running at its
// write deadline, as a write deadline on the stream would. x/net's server
// keeps a stream's write deadline in the connection's serve goroutine: each
// SetWriteDeadline with a time to come is a message to that goroutine,
// which every request would send twice (set, then clear as on a keep-alive
// HTTP/1.1 connection), to the one goroutine that all of a connection's
// streams share. A deadline already past is acted on at once from the
// caller's goroutine (the stream is reset), so streamCut keeps the timer
// itself and sets a past deadline when it fires. A response controller
// must not be used once its handler has returned, which stop, deferred by
// the handler, guarantees.
type streamCut struct {
	mu      sync.Mutex
	rc      *http.ResponseController
	stopped bool
	timer   *time.Timer
}

// cutStreamAt resets the stream of rc at deadline unless stop is called
// first.
func cutStreamAt(rc *http.ResponseController, deadline time.Time) *streamCut {
	c := &streamCut{rc: rc}
	c.timer = time.AfterFunc(time.Until(deadline), c.cut)
	return c
}

func (c *streamCut) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		_ = c.rc.SetWriteDeadline(time.Now().Add(-time.Second))
	}
}

// stop cancels the cut; once it returns, a cut that had started is done.
func (c *streamCut) stop() {
	c.timer.Stop()
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
}

// statusGrace is how long after a request's context ends its response may
// still be written: a handler that stops at the deadline (a write that
// waited for the disk) answers 504 Timeout then, rather than having its
// stream cut with no Status. A tenth of the timeout, between 100 ms and 1 s.
func statusGrace(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 100*time.Millisecond), time.Second)
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
