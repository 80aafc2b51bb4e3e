package serving

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// BenchmarkLimit times the in-flight limits around a handler that does
// nothing, for a create and a get that find a free seat: the cost every
// request pays when the server is not saturated.
func BenchmarkLimit(b *testing.B) {
	h := Limit(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), LimitOptions{RequestTimeout: -1}, NewMetrics())
	for _, bc := range []struct {
		name, method, verb string
	}{
		{"create", http.MethodPost, "create"},
		{"get", http.MethodGet, "get"},
	} {
		r := httptest.NewRequest(bc.method, "/apis/example.setpoint.dev/v1/namespaces/default/widgets", nil)
		ctx := request.WithRequestInfo(r.Context(), &request.RequestInfo{IsResourceRequest: true, Verb: bc.verb, Resource: "widgets"})
		ctx = request.WithUser(ctx, &user.DefaultInfo{Name: "alice"})
		r = r.WithContext(ctx)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			w := httptest.NewRecorder()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
		b.Run(bc.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := httptest.NewRecorder()
				for pb.Next() {
					h.ServeHTTP(w, r)
				}
			})
		})
	}
}
