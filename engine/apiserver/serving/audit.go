package serving

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/felixge/httpsnoop"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// AuditOptions configures NewAuditor.
type AuditOptions struct {
	// Policy decides which requests are recorded and how much of each (an
	// audit.k8s.io Policy, as policy.LoadPolicyFromFile reads it);
	// required.
	Policy *auditinternal.Policy
	// Out receives the events, audit.k8s.io/v1 Event objects as JSON, one
	// per line; required. Close closes it when it is an io.Closer.
	Out io.Writer
	// BufferSize bounds the events waiting to be written;
	// DefaultAuditBufferSize when 0. Further events are dropped.
	BufferSize int
	// Logger gets dropped events and write errors; slog.Default when nil.
	Logger *slog.Logger
	// Registerer gets the audit metrics (setpoint_audit_events_total,
	// setpoint_audit_events_dropped_total, setpoint_audit_write_errors_total);
	// none when nil.
	Registerer prometheus.Registerer
}

// Auditor records requests in an audit log, as kube-apiserver's --audit-*
// flags do: an audit.k8s.io/v1 Policy decides the level of each request
// (None, Metadata, Request, RequestResponse) and the stages left out, and
// the events (RequestReceived, ResponseStarted for watches and other
// long-running requests, ResponseComplete, Panic) go through a bounded
// buffer to Out. A nil *Auditor records nothing.
//
// Threads: NewAuditor starts one goroutine, which writes the buffered
// events to Out; Close stops it.
type Auditor struct {
	policy audit.PolicyRuleEvaluator
	sink   *auditSink
	out    io.Writer

	closeOnce sync.Once
	closeErr  error
}

// NewAuditor returns an Auditor writing to opts.Out and starts its writer.
func NewAuditor(opts AuditOptions) (*Auditor, error) {
	if opts.Policy == nil || opts.Out == nil {
		return nil, errors.New("serving: audit: a policy and an output are required")
	}
	if opts.BufferSize < 0 {
		return nil, fmt.Errorf("serving: audit: buffer size %d: want 0 or more", opts.BufferSize)
	}
	if opts.BufferSize == 0 {
		opts.BufferSize = DefaultAuditBufferSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	sink, err := newAuditSink(opts.Out, opts.BufferSize, opts.Logger, opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("serving: audit: %w", err)
	}
	return &Auditor{policy: policy.NewPolicyRuleEvaluator(opts.Policy), sink: sink, out: opts.Out}, nil
}

// Close writes the events still buffered, stops the writer and closes
// Out when it is an io.Closer. Events recorded later are dropped. It is
// idempotent.
func (a *Auditor) Close() error {
	if a == nil {
		return nil
	}
	a.closeOnce.Do(func() {
		a.sink.close()
		if c, ok := a.out.(io.Closer); ok {
			a.closeErr = c.Close()
		}
	})
	return a.closeErr
}

// Pending is how many recorded events are not written yet: those waiting in
// the buffer and the one being written. After a Close that did not return
// (Out's write stalled), it is how many a process exiting now loses.
func (a *Auditor) Pending() int {
	if a == nil {
		return 0
	}
	return int(a.sink.pending.Load())
}

// Wrap returns next with its requests audited; it goes right after
// authentication, so that the events name the user, and before
// impersonation, which adds the impersonated user to them
// (audit.LogImpersonatedUser). The request's metadata (user, source IPs,
// user agent, verb, object) is recorded at level Metadata and up, its body
// at Request and up, its response's body at RequestResponse (but for
// long-running requests, as kube-apiserver). A nil Auditor returns next.
func (a *Auditor) Wrap(next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	longRunning := func(r *http.Request, _ *request.RequestInfo) bool { return LongRunning(r) }
	sink := &detachSink{Sink: a.sink}
	audited := asAnonymous(filters.WithAudit(withoutAnonymous(a.bodies(next)), sink, a.policy, longRunning))
	// A request that may detach its connection (see Detach) has its
	// ResponseComplete event wait for the connection's end.
	held := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lt, _ := r.Context().Value(lifetimeKey{}).(*lifetime); lt != nil {
			if ac := audit.AuditContextFrom(r.Context()); ac != nil {
				defer sink.watch(ac.AuditID(), lt)()
			}
		}
		audited.ServeHTTP(w, r)
	})
	initialised := filters.WithAuditInit(held)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if audit.AuditContextFrom(r.Context()) == nil {
			// Not behind WrapAuthentication: the request gets its
			// audit context and ID here.
			initialised.ServeHTTP(w, r)
			return
		}
		held.ServeHTTP(w, r)
	})
}

// anonymousUser is whom the events of requests served without credentials
// name, as kube-apiserver's anonymous authenticator does.
var anonymousUser = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}

// auditedCtxKey holds, in the context the audit filter sees, the context of
// a request that has no user, so that withoutAnonymous can give it back.
type auditedCtxKey struct{}

// asAnonymous hands next a request without a user (one on a public path)
// as system:anonymous in the group system:unauthenticated, so that its
// audit event names them and policy rules by user or group match them, as
// in kube-apiserver.
func asAnonymous(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if _, ok := request.UserFrom(ctx); ok {
			next.ServeHTTP(w, r)
			return
		}
		anon := context.WithValue(request.WithUser(ctx, anonymousUser), auditedCtxKey{}, ctx)
		next.ServeHTTP(w, r.WithContext(anon))
	})
}

// withoutAnonymous gives the request asAnonymous named back its own
// context, without a user: past the audit filter, a request without
// credentials stays one (the layers after it let it through on the public
// paths only by that).
func withoutAnonymous(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ctx, ok := r.Context().Value(auditedCtxKey{}).(context.Context); ok {
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// WrapAuthentication goes around authentication (and inside Instrument,
// which resolves the request info): it gives each request its audit
// context and ID (the Audit-ID header, echoed in the response, as
// kube-apiserver's WithAuditInit), and records the requests authentication
// refuses (401) as kube-apiserver's WithFailedAuthenticationAudit does: one
// ResponseStarted event without a user, saying which credentials were
// tried. A nil Auditor returns next.
func (a *Auditor) WrapAuthentication(next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	return filters.WithAuditInit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received := time.Now()
		tried := credentialsOf(r) // before authentication consumes them
		ww := httpsnoop.Wrap(w, httpsnoop.Hooks{
			WriteHeader: func(next httpsnoop.WriteHeaderFunc) httpsnoop.WriteHeaderFunc {
				return func(code int) {
					if code == http.StatusUnauthorized {
						a.failedAuthentication(r, received, tried.String())
					}
					next(code)
				}
			},
		})
		next.ServeHTTP(ww, r)
	}))
}

// failedAuthentication records a request authentication refused, unless
// the request went past authentication (its audit context was initialised
// by Wrap, which records it).
func (a *Auditor) failedAuthentication(r *http.Request, received time.Time, methods string) {
	ctx := r.Context()
	ac := audit.AuditContextFrom(ctx)
	if ac == nil || ac.GetEventLevel() != "" {
		return
	}
	attrs, err := filters.GetAuthorizerAttributes(ctx)
	if err != nil {
		return
	}
	rac := a.policy.EvaluatePolicyRule(attrs)
	if err := ac.Init(rac, a.sink); err != nil || rac.Level == auditinternal.LevelNone {
		return
	}
	audit.LogRequestMetadata(ctx, r, received, attrs)
	ac.SetEventResponseStatus(&metav1.Status{Message: methods, Code: http.StatusUnauthorized})
	ac.ProcessEventStage(ctx, auditinternal.StageResponseStarted)
}

// credentials are the kinds of credentials a request carries.
type credentials struct{ basic, bearer, x509 bool }

func credentialsOf(r *http.Request) credentials {
	var c credentials
	_, _, c.basic = r.BasicAuth()
	if scheme, _, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "bearer") {
		c.bearer = true
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		c.bearer = c.bearer || strings.Contains(v, wsTokenPrefix)
	}
	c.x509 = r.TLS != nil && len(r.TLS.PeerCertificates) > 0
	return c
}

// String says which credentials were tried, in kube-apiserver's words for
// a failed authentication.
func (c credentials) String() string {
	var m []string
	for _, k := range []struct {
		on   bool
		name string
	}{{c.basic, "basic"}, {c.bearer, "bearer"}, {c.x509, "x509"}} {
		if k.on {
			m = append(m, k.name)
		}
	}
	if len(m) == 0 {
		return "Authentication failed, no credentials provided"
	}
	return "Authentication failed, attempted: " + strings.Join(m, ", ")
}
