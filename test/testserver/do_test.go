package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDoWith sends requests through Do and DoWith to a TLS server that
// echoes what it got, and checks the headers each sends and the time
// limit.
func TestDoWith(t *testing.T) {
	block := make(chan struct{})
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			select {
			case <-block:
			case <-r.Context().Done():
			}
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, strings.Join([]string{r.Method, r.URL.Path, r.Header.Get("Authorization"),
			r.Header.Get("Content-Type"), r.Header.Get("Impersonate-User"), string(b)}, "|"))
	}))
	defer ts.Close()
	defer close(block)
	s := &Server{URL: ts.URL, CAPool: ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}

	// counted is a client that counts the requests it sends.
	var sent atomic.Int32
	base := ts.Client().Transport
	counted := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return base.RoundTrip(r)
	})}

	tests := []struct {
		name  string
		do    func() (int, []byte, error)
		wantB string
	}{
		{name: "Do", do: func() (int, []byte, error) { return s.Do("GET", "/x", "", nil) },
			wantB: "GET|/x||||"},
		{name: "Do with a body", do: func() (int, []byte, error) { return s.Do("POST", "/x", "tok", strings.NewReader(`{}`)) },
			wantB: "POST|/x|Bearer tok|application/json||{}"},
		{name: "headers", do: func() (int, []byte, error) {
			return s.DoWith("PATCH", "/y", "tok", strings.NewReader(`{"a":1}`), DoOptions{Header: http.Header{
				"content-type": {"application/merge-patch+json"}, "Impersonate-User": {"alice"}}})
		}, wantB: `PATCH|/y|Bearer tok|application/merge-patch+json|alice|{"a":1}`},
		{name: "client", do: func() (int, []byte, error) {
			code, b, err := s.DoWith("GET", "/z", "", nil, DoOptions{Client: counted})
			if sent.Load() != 1 {
				return code, b, fmt.Errorf("the client given sent %d requests, want 1", sent.Load())
			}
			return code, b, err
		}, wantB: "GET|/z||||"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b, err := tt.do()
			if err != nil || code != http.StatusTeapot {
				t.Fatalf("code %d, %v; want %d", code, err, http.StatusTeapot)
			}
			if d := cmp.Diff(tt.wantB, string(b)); d != "" {
				t.Errorf("request as the server saw it (-want +got):\n%s", d)
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		_, _, err := s.DoWith("GET", "/block", "", nil, DoOptions{Timeout: 50 * time.Millisecond})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("DoWith past its timeout: %v, want %v", err, context.DeadlineExceeded)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("DoWith returned after %v", d)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
