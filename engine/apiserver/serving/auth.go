package serving

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
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

// Authenticator checks bearer tokens. Its zero value rejects every request
// that needs a token.
type Authenticator struct {
	token  []byte
	user   user.Info
	public []string // anonymousPaths and the caller's public paths
	// tokens check, in order, a token that is not the admin's.
	tokens []authenticator.Token
}

// NewAuthenticator returns an Authenticator that accepts token as the admin
// user. public are further paths (with their subpaths) served without a
// token, such as static files that hold no secrets.
func NewAuthenticator(token string, public ...string) *Authenticator {
	return &Authenticator{token: []byte(token), user: AdminUser, public: append(slices.Clone(anonymousPaths), public...)}
}

// isPublic tells whether path is served without a token.
func (a *Authenticator) isPublic(path string) bool {
	if a.public == nil {
		return Anonymous(path)
	}
	return under(path, a.public)
}

// Authenticate returns the user the request's credentials name, or false. It
// reads the Authorization header and, on WebSocket upgrades, the bearer
// subprotocol, which it removes from the request so it is never echoed or
// logged.
func (a *Authenticator) Authenticate(r *http.Request) (user.Info, bool) {
	if len(a.token) == 0 {
		return nil, false
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "bearer") {
			return nil, false
		}
		return a.check(r.Context(), strings.TrimSpace(tok))
	}
	if tok, ok := takeWebSocketToken(r); ok {
		return a.check(r.Context(), tok)
	}
	return nil, false
}

func (a *Authenticator) check(ctx context.Context, tok string) (user.Info, bool) {
	if tok == "" {
		return nil, false
	}
	if subtle.ConstantTimeCompare([]byte(tok), a.token) == 1 {
		return a.user, true
	}
	for _, t := range a.tokens {
		// An error says why a token was refused; it never names the token.
		if resp, ok, err := t.AuthenticateToken(ctx, tok); ok && err == nil {
			return resp.User, true
		}
	}
	return nil, false
}

// takeWebSocketToken finds the bearer subprotocol in Sec-WebSocket-Protocol,
// decodes it and rewrites the header without it.
func takeWebSocketToken(r *http.Request) (string, bool) {
	values := r.Header.Values("Sec-WebSocket-Protocol")
	if len(values) == 0 {
		return "", false
	}
	var token string
	var found bool
	var rest []string
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if enc, ok := strings.CutPrefix(p, wsTokenPrefix); ok {
				if !found {
					if b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "=")); err == nil {
						token, found = string(b), true
					}
				}
				continue
			}
			rest = append(rest, p)
		}
	}
	r.Header.Del("Sec-WebSocket-Protocol")
	if len(rest) > 0 {
		r.Header.Set("Sec-WebSocket-Protocol", strings.Join(rest, ", "))
	}
	return token, found
}

// Wrap returns a handler that lets anonymous paths through, and otherwise
// answers 401 with a meta/v1 Status unless the request carries a valid token,
// in which case it calls next with the user in the request context
// (request.UserFrom).
func (a *Authenticator) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := a.Authenticate(r)
		if !ok {
			if a.isPublic(r.URL.Path) {
				r.Header.Del("Authorization")
				next.ServeHTTP(w, r)
				return
			}
			WriteStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
			return
		}
		// Credentials must not travel further than this.
		r.Header.Del("Authorization")
		if msg := impersonation(r, u); msg != "" {
			WriteStatus(w, http.StatusForbidden, "Forbidden", msg)
			return
		}
		noteUser(r.Context(), u.GetName())
		MarkAuthenticated(r.Context())
		next.ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), u)))
	})
}

// impersonation returns why a request that asks to act as someone else
// (kubectl --as and --as-group send Impersonate-* headers) is refused, or ""
// when it asks nothing of the kind. Setpoint has one user and no
// authorization policy to evaluate another against, so it refuses rather
// than answer as the admin, which would tell `kubectl auth can-i --as` that
// anybody may do anything. The message is Kubernetes' for a denied
// impersonation.
func impersonation(r *http.Request, u user.Info) string {
	// In a fixed order, the user first, as Kubernetes checks them: kubectl
	// --as and --as-group send several.
	for _, h := range []struct{ header, resource string }{
		{"Impersonate-User", "users"}, {"Impersonate-Uid", "uids"}, {"Impersonate-Group", "groups"},
	} {
		if v := r.Header.Values(h.header); len(v) > 0 {
			return impersonationRefused(h.resource, v[0], u)
		}
	}
	names := make([]string, 0, len(r.Header))
	for name := range r.Header {
		if strings.HasPrefix(strings.ToLower(name), "impersonate-") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return impersonationRefused("userextras", r.Header.Get(names[0]), u)
}

func impersonationRefused(resource, value string, u user.Info) string {
	return fmt.Sprintf("%s %q is forbidden: User %q cannot impersonate resource %q in API group \"\" at the cluster scope: "+
		"impersonation is not supported (the server has a single user)", resource, value, u.GetName(), resource)
}
