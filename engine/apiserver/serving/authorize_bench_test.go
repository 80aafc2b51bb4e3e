package serving

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
)

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkAuthorize measures what the authorization layer adds to a
// request: the attributes from the RequestInfo (a list with a label
// selector) and the decision, for the admin (system:masters, decided first)
// and for a user an authorizer that allows at once decides.
func BenchmarkAuthorize(b *testing.B) {
	allow := authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionAllow, "", nil
	})
	ann := &user.DefaultInfo{Name: "ann", Groups: []string{user.AllAuthenticated}}
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, bc := range []struct {
		name string
		a    authorizer.Authorizer
		u    user.Info
		h    func(http.Handler) http.Handler
	}{
		{name: "none", u: ann, h: func(h http.Handler) http.Handler { return h }},
		{name: "masters", a: allow, u: AdminUser},
		{name: "configured", a: allow, u: ann},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := Authorize(next, bc.a, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if bc.h != nil {
				h = bc.h(next)
			}
			req := httptest.NewRequest(http.MethodGet, "/apis/example.dev/v1/namespaces/ns/widgets?labelSelector=app%3Dweb", nil)
			info, err := requestInfoFactory.NewRequestInfo(req)
			if err != nil {
				b.Fatal(err)
			}
			req = req.WithContext(request.WithUser(request.WithRequestInfo(req.Context(), info), bc.u))
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}
