package serving

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/websocket"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// AdminUser is who the admin token authenticates as.
var AdminUser = &user.DefaultInfo{
	Name:   "setpoint-admin",
	Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated},
}

// wsTokenPrefix marks the WebSocket subprotocol that carries a bearer token,
// for browsers, which cannot set an Authorization header on a WebSocket.
const wsTokenPrefix = "base64url.bearer.authorization.k8s.io."

// anonymousPaths are served without a token: probes and the version.
var anonymousPaths = []string{"/healthz", "/readyz", "/livez", "/version"}

// Anonymous tells whether path is one of the probes or /version, which are
// served without a token.
func Anonymous(path string) bool { return under(path, anonymousPaths) }

func under(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// AuthenticatorOptions configures NewAuthenticator.
type AuthenticatorOptions struct {
	// Token is the admin bearer token (AdminUser); none when empty.
	Token string
	// Tokens are further bearer token authenticators (a static token file,
	// ServiceAccount tokens, OIDC ID tokens), asked in order after the admin
	// token, for the Authorization header and the WebSocket bearer
	// subprotocol alike.
	Tokens []authenticator.Token
	// ClientCAs verify client certificates: one they signed, for client
	// authentication, authenticates as its subject's common name, in the
	// groups of its organizations. No certificate authenticates when nil.
	ClientCAs *x509.CertPool
	// Public are paths (with their subpaths) served without credentials
	// besides the probes and /version, such as static files that hold no
	// secrets.
	Public []string
	// Logger gets why credentials were refused, at debug level, with
	// whatever the request presented taken out; slog.Default when nil.
	Logger *slog.Logger
}

// Authenticator finds who a request comes from, with Kubernetes' request
// authenticators: a client certificate, then a bearer token in the
// Authorization header, then one in the WebSocket bearer subprotocol. Every
// user it authenticates is in the group system:authenticated. Its zero
// value rejects every request that needs credentials.
type Authenticator struct {
	auth   authenticator.Request // nil: nothing authenticates
	public []string              // anonymousPaths and the caller's public paths
	log    *slog.Logger
}

// NewAuthenticator returns the Authenticator opts describe.
func NewAuthenticator(opts AuthenticatorOptions) *Authenticator {
	a := &Authenticator{public: append(slices.Clone(anonymousPaths), opts.Public...), log: opts.Logger}
	if a.log == nil {
		a.log = slog.Default()
	}
	var tokens []authenticator.Token
	if opts.Token != "" {
		tokens = append(tokens, adminToken([]byte(opts.Token)))
	}
	for _, t := range opts.Tokens {
		if t != nil {
			tokens = append(tokens, t)
		}
	}
	var reqs []authenticator.Request
	if opts.ClientCAs != nil {
		verify := x509request.DefaultVerifyOptions()
		verify.Roots = opts.ClientCAs
		reqs = append(reqs, x509request.New(verify, x509request.CommonNameUserConversion))
	}
	if len(tokens) > 0 {
		t := tokenunion.New(tokens...)
		reqs = append(reqs, bearertoken.New(t), websocket.NewProtocolAuthenticator(t))
	}
	if len(reqs) > 0 {
		a.auth = group.NewAuthenticatedGroupAdder(union.New(reqs...))
	}
	return a
}

// adminToken authenticates the admin token, comparing in constant time.
func adminToken(token []byte) authenticator.Token {
	return authenticator.TokenFunc(func(_ context.Context, tok string) (*authenticator.Response, bool, error) {
		if subtle.ConstantTimeCompare([]byte(tok), token) != 1 {
			return nil, false, nil
		}
		return &authenticator.Response{User: AdminUser}, true, nil
	})
}

// isPublic tells whether path is served without credentials.
func (a *Authenticator) isPublic(path string) bool {
	if a.public == nil {
		return Anonymous(path)
	}
	return under(path, a.public)
}

// Authenticate returns the user the request's credentials name, or false.
func (a *Authenticator) Authenticate(r *http.Request) (user.Info, bool) {
	u, _ := a.authenticate(r)
	return u, u != nil
}

// authenticate returns the user, or nil and why not (nil when the request
// presented no credentials).
func (a *Authenticator) authenticate(r *http.Request) (user.Info, error) {
	if a.auth == nil {
		return nil, nil
	}
	resp, ok, err := a.auth.AuthenticateRequest(r)
	if !ok || resp == nil || resp.User == nil {
		return nil, err
	}
	return resp.User, nil
}

// Wrap returns a handler that calls next with the user in the request
// context (request.UserFrom) when the request's credentials are valid, lets
// public paths through without a user otherwise, and answers every other
// request 401 with a meta/v1 Status. The credentials never travel further:
// the Authorization header and the WebSocket bearer subprotocol are taken
// out of the request before next sees it.
func (a *Authenticator) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := a.authenticate(r)
		if u == nil {
			public := a.isPublic(r.URL.Path)
			if err != nil && !public {
				a.log.Debug("authentication failed", "path", r.URL.Path, "err", redact(err.Error(), presented(r)))
			}
			stripCredentials(r)
			if public {
				next.ServeHTTP(w, r)
				return
			}
			WriteStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
			return
		}
		stripCredentials(r)
		noteUser(r.Context(), u.GetName())
		MarkAuthenticated(r.Context())
		next.ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), u)))
	})
}

// presented returns the credentials a request carries, as sent and decoded,
// so that they can be taken out of a message.
func presented(r *http.Request) []string {
	var out []string
	if h := strings.TrimSpace(r.Header.Get("Authorization")); h != "" {
		out = append(out, h)
		out = append(out, strings.Fields(h)...)
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), wsTokenPrefix)
			if !ok {
				continue
			}
			out = append(out, enc)
			if b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "=")); err == nil {
				out = append(out, string(b))
			}
		}
	}
	return out
}

// redact replaces each secret (of 4 bytes or more) in msg.
func redact(msg string, secrets []string) string {
	// The longest first, so that a token inside a header value goes too.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		if len(s) >= 4 {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return msg
}

// stripCredentials takes the Authorization header and the WebSocket bearer
// subprotocol out of r, keeping the other subprotocols.
func stripCredentials(r *http.Request) {
	r.Header.Del("Authorization")
	values := r.Header.Values("Sec-WebSocket-Protocol")
	if len(values) == 0 {
		return
	}
	var rest []string
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			if p != "" && !strings.HasPrefix(p, wsTokenPrefix) {
				rest = append(rest, p)
			}
		}
	}
	r.Header.Del("Sec-WebSocket-Protocol")
	if len(rest) > 0 {
		r.Header.Set("Sec-WebSocket-Protocol", strings.Join(rest, ", "))
	}
}
