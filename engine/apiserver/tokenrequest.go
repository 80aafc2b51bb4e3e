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
	"github.com/setpoint-dev/setpoint/engine/auth/serviceaccount"
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
	// Issue signs a token for the ServiceAccount the request names (bound
	// to a Secret when it says so) and tells when it expires; required.
	Issue func(ctx context.Context, req serviceaccount.Request) (string, time.Time, error)
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
// exist and 422 for a lifetime under ten minutes. A TokenRequest may bind
// the token to a Secret of the ServiceAccount's namespace, as
// kube-apiserver's does (boundObjectRef): the token carries the Secret's
// name and UID and stops working once it is deleted or replaced. Pods and
// Nodes, which Setpoint does not serve, are answered as kube-apiserver
// answers one that does not exist (404); any other kind is a 400.
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
	issue := serviceaccount.Request{Namespace: namespace, Name: name, UID: string(sa.GetUID()), Audiences: req.Spec.Audiences, Lifetime: time.Duration(seconds) * time.Second}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		if issue.Secret, err = h.boundSecret(r.Context(), namespace, ref); err != nil {
			return nil, err
		}
	}
	tok, exp, err := h.opts.Issue(r.Context(), issue)
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

// boundSecret resolves the object a TokenRequest binds its token to, as
// kube-apiserver's TokenRequest storage does: a Secret of the namespace
// (400 when the reference names none, 404 when there is none, 409 when
// the reference's UID is another's); a
// Pod or a Node is looked up where Setpoint serves none, so that it is
// the 404 kube-apiserver answers for one that does not exist.
func (h tokenRequestHandler) boundSecret(ctx context.Context, namespace string, ref *authenticationv1.BoundObjectReference) (*serviceaccount.BoundObject, error) {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	bindable := gvk.Group == "" && (gvk.Kind == "Secret" || gvk.Kind == "Pod" || gvk.Kind == "Node")
	if bindable && ref.Name == "" {
		// kube-apiserver looks the object up by its name, and its
		// storage's key function refuses an empty one.
		return nil, apierrors.NewBadRequest("Name parameter required.")
	}
	switch {
	case gvk.Group == "" && gvk.Kind == "Secret":
	case gvk.Group == "" && gvk.Kind == "Pod":
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, ref.Name)
	case gvk.Group == "" && gvk.Kind == "Node":
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, ref.Name)
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	secret, err := h.opts.Engine.Get(ctx, kinds.SecretResource, namespace, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if ref.UID != "" && secret.GetUID() != ref.UID {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return &serviceaccount.BoundObject{Name: secret.GetName(), UID: string(secret.GetUID())}, nil
}
