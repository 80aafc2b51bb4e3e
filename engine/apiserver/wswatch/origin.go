package wswatch

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// tokenPrefix starts the subprotocol that carries a bearer token.
const tokenPrefix = "base64url.bearer.authorization.k8s.io."

func isTokenProtocol(p string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(p)), tokenPrefix)
}

// parseOrigin normalizes scheme://host[:port] (lower case, default port
// dropped); ok is false for anything else.
func parseOrigin(s string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		(u.Path != "" && u.Path != "/") {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	host := normalizeHost(scheme, u.Host)
	if host == "" || strings.ContainsAny(host, "*") {
		return "", false
	}
	return scheme + "://" + host, true
}

// normalizeHost lower-cases host[:port] and drops the scheme's default port.
func normalizeHost(scheme, hostport string) string {
	hostport = strings.ToLower(hostport)
	h, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return hostport
}

// CheckOrigin returns nil when s is an AllowedOrigins entry New accepts, and
// an error wrapping ErrBadOrigin otherwise.
func CheckOrigin(s string) error {
	if _, ok := parseOrigin(s); !ok {
		return fmt.Errorf("%w: %q", ErrBadOrigin, s)
	}
	return nil
}

func allowedOrigins(list []string) (map[string]bool, error) {
	m := make(map[string]bool, len(list))
	for _, o := range list {
		n, ok := parseOrigin(o)
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrBadOrigin, o)
		}
		m[n] = true
	}
	return m, nil
}

// originAllowed tells whether r may open a WebSocket: no Origin header
// (not a browser), the request's own origin, or an allowed one.
func (s *Server) originAllowed(r *http.Request) bool {
	values := r.Header.Values("Origin")
	if len(values) == 0 {
		return true
	}
	if len(values) > 1 {
		return false
	}
	origin, ok := parseOrigin(values[0])
	if !ok {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if origin == scheme+"://"+normalizeHost(scheme, r.Host) {
		return true
	}
	return s.allowed[origin]
}
