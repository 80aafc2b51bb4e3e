package abi

import (
	"strings"
	"testing"
)

func TestParseEgressURL(t *testing.T) {
	tests := []struct {
		name, in string
		want     EgressRule
		err      string
	}{
		{name: "https host", in: "https://api.example.com", want: EgressRule{Scheme: "https", Host: "api.example.com"}},
		{name: "default port dropped", in: "https://API.example.com:443/", want: EgressRule{Scheme: "https", Host: "api.example.com"}},
		{name: "wildcard and port", in: "https://*.example.com:8443", want: EgressRule{Scheme: "https", Host: "*.example.com", Port: 8443}},
		{name: "loopback literal", in: "http://127.0.0.1:9000", want: EgressRule{Scheme: "http", Host: "127.0.0.1", Port: 9000}},
		{name: "ipv6 literal", in: "http://[::1]:9000", want: EgressRule{Scheme: "http", Host: "::1", Port: 9000}},
		{name: "other scheme", in: "ftp://example.com", err: "scheme must be http or https"},
		{name: "path", in: "https://example.com/api", err: "no path"},
		{name: "query", in: "https://example.com?a=1", err: "no path, query"},
		{name: "user", in: "https://u:p@example.com", err: "user or password"},
		{name: "no host", in: "https://", err: "names no host"},
		{name: "bad port", in: "https://example.com:99999", err: "is not 1 to 65535"},
		{name: "inner wildcard", in: "https://a.*.example.com", err: "whole first label"},
		{name: "wildcard over a TLD", in: "https://*.com", err: "at least two labels"},
		{name: "bare wildcard", in: "https://*", err: "whole first label"},
		{name: "bad label", in: "https://-a.example.com", err: "not a valid host name"},
		{name: "not a URL", in: "https://exa mple.com", err: "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEgressURL(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseEgressURL(%q) = %+v, %v; want an error containing %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got.Scheme != tt.want.Scheme || got.Host != tt.want.Host || got.Port != tt.want.Port {
				t.Fatalf("ParseEgressURL(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

// FuzzParseEgressURL: a pattern that parses prints as one that parses to
// the same rule, and nothing panics.
func FuzzParseEgressURL(f *testing.F) {
	for _, s := range []string{"https://api.example.com", "https://*.example.com:8443", "http://[::1]:9000", "http://127.0.0.1", "ftp://x", "https://a.*.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseEgressURL(s)
		if err != nil {
			return
		}
		again, err := ParseEgressURL(r.String())
		if err != nil || again.Scheme != r.Scheme || again.Host != r.Host || again.Port != r.Port {
			t.Fatalf("ParseEgressURL(%q) = %+v, printed %q, which parses to %+v, %v", s, r, r.String(), again, err)
		}
	})
}
