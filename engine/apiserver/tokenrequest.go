package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// TokenRequestPattern is the route of the serviceaccounts/token
// subresource: POST an authentication.k8s.io/v1 TokenRequest, get it back
// with a signed token in its status (`kubectl create token NAME`).
const TokenRequestPattern = "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"

// Token lifetime bounds, as Kubernetes' TokenRequest validation has them.
const (
	minTokenSeconds     = 600     // 10 minutes
	maxTokenSeconds     = 1 << 32 // the largest a request may name
	defaultTokenSeconds = 3600    // TokenRequest's default
)

// TokenRequestOptions configures NewTokenRequestHandler.
type TokenRequestOptions struct {
	// Engine serves the ServiceAccounts; required.
	Engine *engine.Service
	// Issue signs a token for the ServiceAccount namespace/name with uid,
	// for audiences, valid for lifetime, and tells when it expires;
	// required.
	Issue func(ctx context.Context, namespace, name, uid string, audiences []string, lifetime time.Duration) (string, time.Time, error)
	// Audiences are a token's audiences when the request names none (the
	// server's own); required.
	Audiences []string
	// MaxLifetime caps a token's lifetime: a request for longer gets
	// this much, as kube-apiserver's --service-account-max-token-expiration
	// does; no cap but the API's when zero.
	MaxLifetime time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// tokenRequestHandler serves TokenRequestPattern.
type tokenRequestHandler struct{ opts TokenRequestOptions }

// NewTokenRequestHandler returns the handler of TokenRequestPattern. It
// answers 405 to anything but POST, 404 for a ServiceAccount that does not
// exist, 400 for a TokenRequest that binds the token to an object (not
// supported) and 422 for a lifetime under ten minutes.
func NewTokenRequestHandler(opts TokenRequestOptions) (http.Handler, error) {
	if opts.Engine == nil || opts.Issue == nil || len(opts.Audiences) == 0 {
		return nil, errors.New("apiserver: TokenRequestOptions needs Engine, Issue and Audiences")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return tokenRequestHandler{opts: opts}, nil
}

// maxTokenRequestBytes bounds a TokenRequest body.
const maxTokenRequestBytes = 64 << 10

var tokenRequestKind = schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenRequest"}

func (h tokenRequestHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serving.MarkServed(r.Context())
	if r.Method != http.MethodPost {
		writeError(w, methodNotAllowed(r))
		return
	}
	req, err := h.issue(w, r, chi.URLParam(r, "namespace"), chi.URLParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeObject(w, r, http.StatusCreated, req)
}

func (h tokenRequestHandler) issue(w http.ResponseWriter, r *http.Request, namespace, name string) (*authenticationv1.TokenRequest, error) {
	body, err := readBody(w, r, maxTokenRequestBytes)
	if err != nil {
		return nil, err
	}
	obj, err := decodeObject(r, body)
	if err != nil {
		return nil, err
	}
	if gvk := obj.GroupVersionKind(); gvk != authenticationv1.SchemeGroupVersion.WithKind("TokenRequest") {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s %s, not an %s TokenRequest", gvk.GroupVersion(), gvk.Kind, authenticationv1.SchemeGroupVersion))
	}
	var req authenticationv1.TokenRequest
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &req, true); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid TokenRequest: %v", err))
	}
	if req.Name != "" && req.Name != name || req.Namespace != "" && req.Namespace != namespace {
		return nil, apierrors.NewBadRequest("the TokenRequest's name and namespace must be empty or those of the ServiceAccount in the path")
	}
	if req.Spec.BoundObjectRef != nil {
		return nil, apierrors.NewBadRequest("spec.boundObjectRef is not supported: Setpoint does not bind tokens to objects; leave it out")
	}
	seconds := int64(defaultTokenSeconds)
	if req.Spec.ExpirationSeconds != nil {
		seconds = *req.Spec.ExpirationSeconds
	}
	path := field.NewPath("spec", "expirationSeconds")
	switch {
	case seconds < minTokenSeconds:
		// Named "" as kube-apiserver names it: the TokenRequest's own name.
		return nil, apierrors.NewInvalid(tokenRequestKind, "", field.ErrorList{field.Invalid(path, seconds, "may not specify a duration less than 10 minutes")})
	case seconds > maxTokenSeconds:
		return nil, apierrors.NewInvalid(tokenRequestKind, "", field.ErrorList{field.Invalid(path, seconds, "may not specify a duration larger than 2^32 seconds")})
	}
	if limit := int64(h.opts.MaxLifetime / time.Second); limit > 0 && seconds > limit {
		seconds = limit
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = h.opts.Audiences
	}
	sa, err := h.opts.Engine.Get(r.Context(), kinds.ServiceAccountResource, namespace, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if sa.GetDeletionTimestamp() != nil {
		return nil, apierrors.NewConflict(kinds.ServiceAccountResource.GroupResource(), name, errors.New("the ServiceAccount is being deleted"))
	}
	tok, exp, err := h.opts.Issue(r.Context(), namespace, name, string(sa.GetUID()), req.Spec.Audiences, time.Duration(seconds)*time.Second)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	req.TypeMeta = metav1.TypeMeta{APIVersion: authenticationv1.SchemeGroupVersion.String(), Kind: "TokenRequest"}
	req.Name, req.Namespace = name, namespace
	req.CreationTimestamp = metav1.NewTime(h.opts.Now().Truncate(time.Second))
	req.Spec.ExpirationSeconds = &seconds
	req.Status = authenticationv1.TokenRequestStatus{Token: tok, ExpirationTimestamp: metav1.NewTime(exp)}
	return &req, nil
}
