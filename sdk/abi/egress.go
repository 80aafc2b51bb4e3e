package abi

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// EgressRule grants HTTP calls with one of Methods to one scheme, host
// pattern and port: one entry of a Plugin's spec.egress.allow, which the
// host checks each call of the http host function against.
type EgressRule struct {
	// Scheme is "http" or "https".
	Scheme string
	// Host is a lower-case host name, a pattern "*.example.com" (any name
	// under example.com, not example.com itself), or an IP address
	// (IPv6 without brackets).
	Host string
	// Port is the port; zero means the scheme's (80, 443).
	Port int
	// Methods are the granted methods, upper case.
	Methods []string
}

// String is the rule's URL pattern, as spec.egress.allow writes it.
func (r EgressRule) String() string {
	h := r.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	s := r.Scheme + "://" + h
	if r.Port != 0 {
		s += ":" + strconv.Itoa(r.Port)
	}
	return s
}

// ParseEgressURL reads a URL pattern of spec.egress.allow: scheme "http" or
// "https", a host name, "*." and a domain, or an IP address, an optional
// port, and no path, query, fragment or user.
func ParseEgressURL(pattern string) (EgressRule, error) {
	u, err := url.Parse(pattern)
	if err != nil {
		return EgressRule{}, fmt.Errorf("%q is not a URL: %w", pattern, err)
	}
	r := EgressRule{Scheme: u.Scheme}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return r, fmt.Errorf("%q: the scheme must be http or https", pattern)
	case u.User != nil:
		return r, fmt.Errorf("%q: a user or password does not belong in a grant", pattern)
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return r, fmt.Errorf("%q: a grant names a scheme, a host and a port only (no path, query or fragment)", pattern)
	case u.Hostname() == "":
		return r, fmt.Errorf("%q names no host", pattern)
	}
	r.Host = strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return r, fmt.Errorf("%q: port %q is not 1 to 65535", pattern, p)
		}
		if n != DefaultPort(r.Scheme) {
			r.Port = n
		}
	}
	if _, err := netip.ParseAddr(r.Host); err == nil {
		return r, nil
	}
	name := strings.TrimPrefix(r.Host, "*.")
	if strings.Contains(name, "*") {
		return r, fmt.Errorf("%q: a wildcard is allowed only as the whole first label (*.example.com)", pattern)
	}
	if name != r.Host && !strings.Contains(name, ".") {
		return r, fmt.Errorf("%q: a wildcard must stand under a domain of at least two labels (*.example.com, not *.com)", pattern)
	}
	for _, label := range strings.Split(name, ".") {
		if !validLabel(label) {
			return r, fmt.Errorf("%q: %q is not a valid host name", pattern, name)
		}
	}
	return r, nil
}

func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, c := range l {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// DefaultPort is the port of scheme: 443 for https, 80 otherwise.
func DefaultPort(scheme string) int {
	if scheme == "https" {
		return 443
	}
	return 80
}
