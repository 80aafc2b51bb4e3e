package serving

import (
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters/impersonation"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// statusCodecs encode the meta/v1 Status of the refusals Kubernetes'
// filters write.
var statusCodecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, metav1.Unversioned)
	return serializer.NewCodecFactory(scheme)
}()

// withImpersonation lets a request act as another user, group, uid or
// ServiceAccount (the Impersonate-* headers kubectl --as, --as-group and
// --as-uid send) when Decider(authz) allows its user the verb impersonate on
// each of them, and answers 403 otherwise, as kube-apiserver does: the
// group system:masters may, and with a nil authz no one else. A request
// without a user (on a public path) has its Impersonate-* headers dropped.
func withImpersonation(next http.Handler, authz authorizer.Authorizer) http.Handler {
	impersonating := impersonation.WithImpersonation(next, Decider(authz), statusCodecs.WithoutConversion())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := request.UserFrom(r.Context()); ok {
			if impersonates(r.Header) {
				impersonating.ServeHTTP(w, r)
				return
			}
			// The filter passes a request without Impersonate-* headers
			// on untouched: skip its look-ups.
			next.ServeHTTP(w, r)
			return
		}
		for name := range r.Header {
			if strings.HasPrefix(name, "Impersonate-") {
				r.Header.Del(name)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// impersonates tells whether h holds an Impersonate-* header: the
// impersonation filter reads only those (by their canonical names).
func impersonates(h http.Header) bool {
	for name := range h {
		if strings.HasPrefix(name, "Impersonate-") {
			return true
		}
	}
	return false
}
