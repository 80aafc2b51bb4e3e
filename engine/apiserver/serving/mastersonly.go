package serving

import (
	"context"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// selfReviews allows any user to ask who it is and what it may do (the
// self-reviews kube-apiserver's system:basic-user role grants to every
// authenticated user), and has no opinion on anything else.
var selfReviews = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if !a.IsResourceRequest() || a.GetVerb() != "create" || a.GetSubresource() != "" {
		return authorizer.DecisionNoOpinion, "", nil
	}
	switch {
	case a.GetAPIGroup() == authenticationv1.GroupName && a.GetResource() == "selfsubjectreviews",
		a.GetAPIGroup() == authorizationv1.GroupName && (a.GetResource() == "selfsubjectaccessreviews" || a.GetResource() == "selfsubjectrulesreviews"):
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
})

// discoveryPaths are what kube-apiserver's system:discovery role lets
// every authenticated user read (a trailing * matches any subpath).
var discoveryPaths = []string{"/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/",
	"/healthz", "/livez", "/readyz"}

// discovery allows any user to read discovery, the OpenAPI documents, the
// version and the probes, and has no opinion on anything else.
var discovery = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.IsResourceRequest() || a.GetVerb() != "get" {
		return authorizer.DecisionNoOpinion, "", nil
	}
	p := a.GetPath()
	for _, d := range discoveryPaths {
		if prefix, ok := strings.CutSuffix(d, "*"); ok && strings.HasPrefix(p, prefix) || p == d {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
})

// withMastersOnly answers 403 to every request but discovery and the
// self-reviews unless
// its user is in the group system:masters: the authorization of a server
// without an authorization policy, where users other than the admin
// authenticate but may do nothing. Requests without a user (the public
// paths authentication let through) go on.
func withMastersOnly(next http.Handler) http.Handler {
	authz, _ := union.New(
		union.NamedAuthorizer{AuthorizerName: "masters", Authorizer: mastersOnly},
		union.NamedAuthorizer{AuthorizerName: "self-reviews", Authorizer: selfReviews},
		union.NamedAuthorizer{AuthorizerName: "discovery", Authorizer: discovery},
	)
	authorized := filters.WithAuthorization(next, authz, statusCodecs.WithoutConversion())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := request.UserFrom(r.Context()); !ok {
			next.ServeHTTP(w, r)
			return
		}
		authorized.ServeHTTP(w, r)
	})
}
