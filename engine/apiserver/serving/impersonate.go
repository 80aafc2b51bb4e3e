package serving

import (
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
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

// mastersOnly allows everything to the group system:masters and has no
// opinion on anyone else: the decisions when no authorizer is configured.
var mastersOnly authorizer.Authorizer = authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)

// withImpersonation lets a request act as another user, group, uid or
// ServiceAccount (the Impersonate-* headers kubectl --as, --as-group and
// --as-uid send) when authz allows its user the verb impersonate on each of
// them, and answers 403 otherwise, as kube-apiserver does. With a nil authz
// only the group system:masters may impersonate. A request without a user
// (on a public path) has its Impersonate-* headers dropped.
func withImpersonation(next http.Handler, authz authorizer.Authorizer) http.Handler {
	if authz == nil {
		authz = mastersOnly
	}
	impersonating := impersonation.WithImpersonation(next, authz, statusCodecs.WithoutConversion())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := request.UserFrom(r.Context()); ok {
			impersonating.ServeHTTP(w, r)
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
