package apiserver

import (
	"context"
	"net/http"

	"k8s.io/apiserver/pkg/authorization/authorizer"
	endpointsrequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
)

// mayCreate returns the check server-side apply runs before it creates the
// object t names (engine.WithCreateCheck): the serving layer authorized the
// request's verb, patch; creating needs create too, as in kube-apiserver.
// A request without a user is one the serving layer let through without
// credentials, which an apply never is; it is not checked here.
func (s *Server) mayCreate(r *http.Request, t target) func(context.Context) error {
	return func(ctx context.Context) error {
		u, ok := endpointsrequest.UserFrom(ctx)
		if !ok {
			return nil
		}
		return serving.Allowed(ctx, s.authz, authorizer.AttributesRecord{
			User:            u,
			Verb:            "create",
			APIGroup:        t.gvr().Group,
			APIVersion:      t.gvr().Version,
			Resource:        t.gvr().Resource,
			Subresource:     t.sub,
			Namespace:       t.namespace,
			Name:            t.name,
			ResourceRequest: true,
			Path:            r.URL.Path,
		}, s.log)
	}
}
