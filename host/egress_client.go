package host

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// EgressObserver is told about every HTTP call a plugin makes: the plugin,
// the grant that matched (its URL pattern, or "" when none did), the status
// (the HTTP code, or the reason there was no response, lower case) and how
// long it took. The server counts them in its metrics.
type EgressObserver interface {
	ObserveEgress(plugin, grant, status string, d time.Duration)
}

// maxRedirects bounds the redirects one call follows.
const maxRedirects = 10

// egressClient sends one plugin version's HTTP calls under its grant. It is
// made on the version's first call and shared by its instances.
type egressClient struct {
	grant   *Egress
	plugin  string
	client  *http.Client
	slots   chan struct{} // one per call in flight
	limiter *rate.Limiter // nil: no rate limit
	maxBody int64
	// setupErr is why the grant cannot be used (a CA bundle without a
	// certificate); every call fails with it.
	setupErr error
	// extismHosts are the grant's hosts as Extism's allowed_hosts.
	extismHosts []string
}

// lazyEgress makes a version's egressClient on first use.
type lazyEgress struct {
	once sync.Once
	c    *egressClient
}

func (l *lazyEgress) get(p *Plugin) *egressClient {
	l.once.Do(func() { l.c = newEgressClient(p.name, p.cfg.Egress) })
	return l.c
}

func newEgressClient(plugin string, g *Egress) *egressClient {
	c := &egressClient{grant: g, plugin: plugin, extismHosts: extismAllowedHosts(g)}
	if g == nil {
		return c
	}
	c.maxBody = g.MaxResponseBytes
	if c.maxBody <= 0 {
		c.maxBody = DefaultEgressMaxResponseBytes
	}
	n := g.Concurrency
	if n <= 0 {
		n = DefaultEgressConcurrency
	}
	c.slots = make(chan struct{}, n)
	if g.RatePerSecond > 0 {
		burst := g.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(g.RatePerSecond)))
		}
		c.limiter = rate.NewLimiter(rate.Limit(g.RatePerSecond), burst)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(g.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(g.CABundle) {
			c.setupErr = errors.New("spec.egress.caBundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	tr := &http.Transport{
		Proxy: nil, // never the environment's proxy: the grant names where calls go
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			d := net.Dialer{Timeout: 10 * time.Second, Control: g.dialGuard(strings.ToLower(host))}
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConnsPerHost:   n,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // the call's context bounds it
		ForceAttemptHTTP2:     true,
	}
	c.client = &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if err := c.check(req.URL, req.Method); err != nil {
				return err
			}
			return nil
		},
	}
	return c
}

// check reports why the grant does not allow method to u, or nil.
func (c *egressClient) check(u *url.URL, method string) error {
	t, err := targetOf(u)
	if err != nil {
		return &egressBadRequest{msg: err.Error()}
	}
	if _, ok := c.grant.rule(t, method); !ok {
		return &egressDenied{msg: fmt.Sprintf("egress to %s (%s) is not granted: add it to spec.egress.allow of Plugin %s", t, method, c.plugin)}
	}
	return nil
}

// egressBadRequest is a request the host cannot send as it is.
type egressBadRequest struct{ msg string }

func (e *egressBadRequest) Error() string { return e.msg }

// do sends one call under the grant and returns the response document.
// admit restricts it to GET and HEAD: an admission call must have no side
// effects.
func (c *egressClient) do(ctx context.Context, r abi.HTTPRequest, admit bool) (resp abi.HTTPResponse, grant string) {
	method := strings.ToUpper(r.Method)
	if method == "" {
		method = http.MethodGet
	}
	fail := func(reason, msg string) (abi.HTTPResponse, string) {
		return abi.HTTPResponse{Error: msg, Reason: reason}, grant
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return fail(abi.HTTPBadRequest, fmt.Sprintf("http: the URL is not valid: %v", redactErr(err)))
	}
	t, err := targetOf(u)
	if err != nil {
		return fail(abi.HTTPBadRequest, "http: "+err.Error())
	}
	rule, ok := c.grant.rule(t, method)
	if !ok {
		return fail(abi.HTTPForbidden, fmt.Sprintf("%v: egress to %s (%s) is not granted: add it to spec.egress.allow of Plugin %s", ErrPermissionDenied, t, method, c.plugin))
	}
	grant = rule.String()
	if admit && method != http.MethodGet && method != http.MethodHead {
		return fail(abi.HTTPForbidden, fmt.Sprintf("%v: egress %s to %s during admission: an admit call may only GET or HEAD (it must have no side effects)", ErrPermissionDenied, method, t))
	}
	if c.setupErr != nil {
		return fail(abi.HTTPTLS, "http: "+c.setupErr.Error())
	}
	ctx, cancel := egressContext(ctx, c.grant.Timeout)
	defer cancel()
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		return fail(abi.HTTPTimeout, fmt.Sprintf("http: %s %s: the deadline passed while %d calls were in flight (spec.egress.concurrency)", method, t, cap(c.slots)))
	}
	if c.limiter != nil {
		if err := c.limiter.Wait(ctx); err != nil {
			return fail(abi.HTTPTimeout, fmt.Sprintf("http: %s %s: the deadline would pass waiting for the rate limit (spec.egress.ratePerSecond %g)", method, t, c.grant.RatePerSecond))
		}
	}
	var body io.Reader
	if len(r.Body) > 0 {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fail(abi.HTTPBadRequest, "http: "+redactErr(err))
	}
	for k, v := range r.Headers {
		if strings.EqualFold(k, "Host") {
			// The Host header would send the request to another virtual
			// host than the grant checked.
			return fail(abi.HTTPBadRequest, "http: the Host header may not be set (the URL names the host)")
		}
		req.Header.Set(k, v)
	}
	res, err := c.client.Do(req)
	if err != nil {
		return fail(classifyEgress(ctx, err))
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, c.maxBody+1))
	if err != nil {
		return fail(classifyEgress(ctx, err))
	}
	if int64(len(b)) > c.maxBody {
		return fail(abi.HTTPTooLarge, fmt.Sprintf("http: the response of %s %s is larger than spec.egress.maxResponseBytes (%d)", method, t, c.maxBody))
	}
	resp = abi.HTTPResponse{Status: int32(res.StatusCode), Body: b}
	if len(res.Header) > 0 {
		resp.Headers = make(map[string]string, len(res.Header))
		for k, v := range res.Header {
			resp.Headers[k] = strings.Join(v, ", ")
		}
	}
	return resp, grant
}

// egressContext bounds one call: by timeout when set, and always to 90% of
// what remains of the plugin call's deadline, so that the guest still has
// time to handle a call that timed out rather than be stopped with it.
func egressContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) * 9 / 10; timeout <= 0 || left < timeout {
			timeout = left
		}
	}
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// classifyEgress returns the reason and message of a failed call.
func classifyEgress(ctx context.Context, err error) (string, string) {
	var denied *egressDenied
	var bad *egressBadRequest
	var cert *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var dns *net.DNSError
	var nerr net.Error
	switch {
	case errors.As(err, &denied):
		return abi.HTTPForbidden, fmt.Sprintf("%v: %s", ErrPermissionDenied, denied.msg)
	case errors.As(err, &bad):
		return abi.HTTPBadRequest, "http: " + bad.msg
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return abi.HTTPTimeout, "http: the call timed out: " + redactErr(err)
	case errors.As(err, &cert), errors.As(err, &unknownAuth), errors.As(err, &hostname):
		return abi.HTTPTLS, "http: the server's certificate did not verify: " + redactErr(err)
	case errors.As(err, &dns):
		return abi.HTTPUnavailable, "http: " + redactErr(err)
	case errors.As(err, &nerr) && nerr.Timeout():
		return abi.HTTPTimeout, "http: the call timed out: " + redactErr(err)
	}
	return abi.HTTPUnavailable, "http: " + redactErr(err)
}

// redactErr is err's message with the URL of a *url.Error without its
// query, which may carry credentials.
func redactErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			return fmt.Sprintf("%s %q: %v", ue.Op, redactURL(u), ue.Err)
		}
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// statusLabel is the status of a call as metrics count it: the HTTP code,
// or the reason there was no response, lower case.
func statusLabel(r abi.HTTPResponse) string {
	if r.Reason != "" {
		return strings.ToLower(r.Reason)
	}
	return strconv.Itoa(int(r.Status))
}

// http serves the http host function.
func (s *callScope) http(ctx context.Context, req []byte) []byte {
	var r abi.HTTPRequest
	if err := r.UnmarshalJSON(req); err != nil {
		resp := abi.HTTPResponse{Error: "http: " + err.Error(), Reason: abi.HTTPBadRequest}
		s.buf = resp.AppendJSON(s.buf[:0])
		return s.buf
	}
	resp := s.egress(ctx, r)
	s.buf = resp.AppendJSON(s.buf[:0])
	return s.buf
}

// egress sends one call of the plugin under its grant, counts it and logs
// it (method, host, status, duration; never headers or bodies, which carry
// credentials).
func (s *callScope) egress(ctx context.Context, r abi.HTTPRequest) abi.HTTPResponse {
	p := s.p
	start := time.Now()
	resp, grant := p.egress.get(p).do(ctx, r, s.export == abi.ExportAdmit)
	d := time.Since(start)
	status := statusLabel(resp)
	if o := p.host.opts.Egress; o != nil {
		o.ObserveEgress(p.name, grant, status, d)
	}
	host := ""
	if u, err := url.Parse(r.URL); err == nil {
		host = u.Host
	}
	method := strings.ToUpper(r.Method)
	if method == "" {
		method = http.MethodGet
	}
	level := slog.LevelInfo
	if resp.Reason != "" {
		level = slog.LevelWarn
	}
	attrs := map[string]string{"method": method, "host": host, "status": status, "durationMs": strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64)}
	msg := fmt.Sprintf("egress %s %s: %s in %s", method, host, status, d.Round(time.Microsecond))
	if resp.Error != "" {
		msg += ": " + resp.Error
	}
	s.logLine(ctx, level, msg, attrs)
	return resp
}
