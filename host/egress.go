package host

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Egress is what one plugin may reach over HTTP through the http host
// function (and, for Extism-ABI modules, Extism's http_request). A nil
// *Egress grants nothing: every call is refused, naming the grant to add.
//
// A call is sent only when a rule grants its scheme, host, port and method.
// The address it connects to is checked when it is dialled, after the name
// resolved: loopback, link-local (cloud metadata at 169.254.169.254
// included), unspecified and multicast addresses are refused unless the
// rule that grants the call names that address literally (or names
// "localhost", for loopback). Every redirect hop is checked like the first
// request. TLS certificates are always verified.
type Egress struct {
	// Allow are the grants; a call needs one that matches.
	Allow []EgressRule
	// Timeout bounds one call; the plugin call's deadline bounds it too.
	// Zero: only the call's deadline.
	Timeout time.Duration
	// MaxResponseBytes caps a response body. Default DefaultEgressMaxResponseBytes.
	MaxResponseBytes int64
	// Concurrency caps the calls in flight across the plugin's instances.
	// Default DefaultEgressConcurrency.
	Concurrency int
	// RatePerSecond limits calls per second (a token bucket of Burst);
	// zero means no rate limit.
	RatePerSecond float64
	// Burst is the token bucket's size. Default: RatePerSecond rounded up,
	// at least 1.
	Burst int
	// CABundle are PEM certificates that replace the system roots for
	// https calls.
	CABundle []byte
}

// Defaults of Egress.
const (
	DefaultEgressMaxResponseBytes = 1 << 20
	DefaultEgressConcurrency      = 4
)

// EgressRule grants calls with one of its methods to one scheme, host
// pattern and port (see abi.EgressRule; ParseEgressURL reads the patterns
// of spec.egress.allow).
type EgressRule = abi.EgressRule

// ParseEgressURL reads a URL pattern of spec.egress.allow.
func ParseEgressURL(pattern string) (EgressRule, error) { return abi.ParseEgressURL(pattern) }

func defaultPort(scheme string) int { return abi.DefaultPort(scheme) }

// matchHost reports whether host (lower case, no brackets) matches the
// rule's host.
func matchHost(r EgressRule, host string) bool {
	if suffix, ok := strings.CutPrefix(r.Host, "*"); ok {
		return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
	}
	return host == r.Host
}

// grants reports whether the rule grants method to u.
func grants(r EgressRule, scheme, host string, port int, method string) bool {
	rp := r.Port
	if rp == 0 {
		rp = defaultPort(r.Scheme)
	}
	return r.Scheme == scheme && rp == port && matchHost(r, host) && slices.Contains(r.Methods, method)
}

// names reports whether the rule names host literally: the one way a call
// may reach a loopback, link-local or unspecified address.
func names(r EgressRule, host string) bool { return !strings.HasPrefix(r.Host, "*") && r.Host == host }

// target is what a call's URL asks for.
type target struct {
	scheme, host string // host lower case, without brackets
	port         int
}

func (t target) String() string {
	h := t.host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return t.scheme + "://" + h + ":" + strconv.Itoa(t.port)
}

// targetOf reads the scheme, host and port of an absolute URL.
func targetOf(u *url.URL) (target, error) {
	t := target{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname())}
	if t.scheme != "http" && t.scheme != "https" {
		return t, fmt.Errorf("URL %q: the scheme must be http or https", redactURL(u))
	}
	if t.host == "" {
		return t, fmt.Errorf("URL %q names no host", redactURL(u))
	}
	t.host = strings.TrimSuffix(t.host, ".")
	t.port = defaultPort(t.scheme)
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return t, fmt.Errorf("URL %q: port %q is not 1 to 65535", redactURL(u), p)
		}
		t.port = n
	}
	return t, nil
}

// redactURL is u without its user information, query and fragment, which
// may carry credentials: what errors and logs show of a URL.
func redactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.String()
}

// rule returns the rule granting method to t, or false.
func (e *Egress) rule(t target, method string) (EgressRule, bool) {
	if e == nil {
		return EgressRule{}, false
	}
	for _, r := range e.Allow {
		if grants(r, t.scheme, t.host, t.port, method) {
			return r, true
		}
	}
	return EgressRule{}, false
}

// mayReachSpecial reports whether a rule of the grant names host literally,
// so that the call may connect to a loopback, link-local or unspecified
// address host resolves to: an IP literal may reach exactly that address,
// "localhost" may reach loopback.
func (e *Egress) mayReachSpecial(host string, ip netip.Addr) bool {
	if e == nil {
		return false
	}
	for _, r := range e.Allow {
		if !names(r, host) {
			continue
		}
		if lit, err := netip.ParseAddr(r.Host); err == nil && lit.Unmap() == ip {
			return true
		}
		if r.Host == "localhost" && ip.IsLoopback() {
			return true
		}
	}
	return false
}

// specialAddr says why ip is an address a plugin may reach only when its
// grant names it, or "".
func specialAddr(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "a loopback"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local"
	case ip.IsUnspecified(), ip.Is4() && ip.As4()[0] == 0:
		return "an unspecified"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "a multicast"
	}
	return ""
}

// dialGuard checks the address a call connects to, after resolution: the
// net.Dialer's Control hook, so that a name that resolves to loopback now
// (DNS rebinding) is refused like the address itself.
func (e *Egress) dialGuard(host string) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &egressDenied{msg: fmt.Sprintf("egress to %s: cannot read the address %q", host, address)}
		}
		ip := ap.Addr().Unmap()
		if why := specialAddr(ip); why != "" && !e.mayReachSpecial(host, ip) {
			return &egressDenied{msg: fmt.Sprintf("egress to %s: %s resolves to %s, %s address, which a grant must name literally (e.g. http://%s)",
				host, host, ip, why, hostPort(ip.String(), int(ap.Port())))}
		}
		return nil
	}
}

func hostPort(h string, port int) string { return net.JoinHostPort(h, strconv.Itoa(port)) }

// egressDenied is a call the grant refuses.
type egressDenied struct{ msg string }

func (e *egressDenied) Error() string { return e.msg }
