package host

import (
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEgressDialGuard checks the address a call connects to, as the
// dialer's Control hook sees it after resolution: a granted name that
// resolves to loopback or link-local (DNS rebinding, cloud metadata) is
// refused, unless a grant names that address literally.
func TestEgressDialGuard(t *testing.T) {
	rule := func(pattern string) EgressRule {
		r, err := ParseEgressURL(pattern)
		if err != nil {
			t.Fatal(err)
		}
		r.Methods = []string{"GET"}
		return r
	}
	g := &Egress{Allow: []EgressRule{rule("https://*.example.com"), rule("http://127.0.0.1:9000"), rule("http://[::1]:9000"), rule("http://localhost:9000")}}
	tests := []struct {
		host, addr string
		refused    string
	}{
		{host: "api.example.com", addr: "93.184.216.34:443"},
		{host: "api.example.com", addr: "10.1.2.3:443"}, // private networks are not refused
		{host: "api.example.com", addr: "127.0.0.1:443", refused: "a loopback address"},
		{host: "api.example.com", addr: "[::ffff:127.0.0.1]:443", refused: "a loopback address"},
		{host: "api.example.com", addr: "[::1]:443", refused: "a loopback address"},
		{host: "api.example.com", addr: "169.254.169.254:80", refused: "a link-local address"},
		{host: "api.example.com", addr: "[fe80::1]:80", refused: "a link-local address"},
		{host: "api.example.com", addr: "0.0.0.0:80", refused: "an unspecified address"},
		{host: "127.0.0.1", addr: "127.0.0.1:9000"},
		{host: "::1", addr: "[::1]:9000"},
		{host: "localhost", addr: "127.0.0.1:9000"},
		{host: "localhost", addr: "169.254.169.254:9000", refused: "a link-local address"},
		{host: "127.0.0.2", addr: "127.0.0.2:9000", refused: "a loopback address"},
	}
	for _, tt := range tests {
		err := g.dialGuard(tt.host)("tcp", tt.addr, nil)
		if tt.refused == "" {
			if err != nil {
				t.Errorf("%s at %s: %v, want allowed", tt.host, tt.addr, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.refused) {
			t.Errorf("%s at %s: %v, want refused as %s", tt.host, tt.addr, err, tt.refused)
		}
	}

	// Through a real dial: a name the grant allows, resolved to the
	// loopback address of a live server, is refused before connecting.
	ts := httptest.NewServer(nil)
	defer ts.Close()
	d := net.Dialer{Control: g.dialGuard("api.example.com")}
	conn, err := d.Dial("tcp", ts.Listener.Addr().String())
	var denied *egressDenied
	if err == nil {
		conn.Close()
	}
	if !errors.As(err, &denied) {
		t.Errorf("dial api.example.com at %s: %v, want refused", ts.Listener.Addr(), err)
	}
}
