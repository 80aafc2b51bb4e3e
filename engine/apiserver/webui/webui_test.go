package webui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/apiserver/webui"
)

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(webui.New())
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		name, method, path, etag string
		code                     int
		ctype, contains          string
	}{
		{name: "index", method: "GET", path: "/ui/", code: 200, ctype: "text/html", contains: `<script type="module" src="app.js">`},
		{name: "client", method: "GET", path: "/ui/setpoint.js", code: 200, ctype: "text/javascript", contains: "export function watch("},
		{name: "app", method: "GET", path: "/ui/app.js", code: 200, ctype: "text/javascript", contains: "sessionStorage"},
		{name: "style", method: "GET", path: "/ui/style.css", code: 200, ctype: "text/css"},
		{name: "editor", method: "GET", path: "/ui/editor.js", code: 200, ctype: "text/javascript", contains: "application/apply-patch+yaml"},
		{name: "redirect", method: "GET", path: "/ui", code: http.StatusMovedPermanently},
		{name: "missing", method: "GET", path: "/ui/nope.js", code: 404},
		{name: "no listing", method: "GET", path: "/ui/assets/", code: 404},
		{name: "post", method: "POST", path: "/ui/app.js", code: http.StatusMethodNotAllowed},
		{name: "cached", method: "GET", path: "/ui/setpoint.js", etag: "same", code: http.StatusNotModified},
	}
	var etag string
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if tc.etag != "" {
				req.Header.Set("If-None-Match", etag)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.code)
			}
			if tc.code != 200 {
				return
			}
			if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, tc.ctype) {
				t.Fatalf("content type %q, want %q", got, tc.ctype)
			}
			if !strings.Contains(string(body), tc.contains) {
				t.Fatalf("body lacks %q", tc.contains)
			}
			csp := resp.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
				t.Fatalf("CSP %q", csp)
			}
			if tc.path == "/ui/setpoint.js" {
				etag = resp.Header.Get("ETag")
			}
		})
	}
}
