package serving

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Decider returns the authorizer that decides requests when a is the
// configured one, as kube-apiserver chains its authorizers: the group
// system:masters may do anything first, whatever a says (so that the admin
// keeps working while a's caches fill, and cannot lock itself out), then a.
// With a nil a, only system:masters may do anything, and everyone else only
// ask who they are and what they may do (the self reviews, which
// Kubernetes' role system:basic-user grants every authenticated user). What
// no authorizer allows is denied.
func Decider(a authorizer.Authorizer) authorizer.Authorizer {
	masters := authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)
	second := union.NamedAuthorizer{AuthorizerName: "configured", Authorizer: a}
	if a == nil {
		second = union.NamedAuthorizer{AuthorizerName: "self-reviews", Authorizer: selfReviewsAllowed}
	}
	// union.New fails only on empty or duplicate names.
	u, _ := union.New(union.NamedAuthorizer{AuthorizerName: "masters", Authorizer: masters}, second)
	return u
}

// selfReviewsAllowed allows creating the self reviews (SelfSubjectReview,
// SelfSubjectAccessReview, SelfSubjectRulesReview) and has no opinion on
// anything else.
var selfReviewsAllowed = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if !a.IsResourceRequest() || a.GetVerb() != "create" || a.GetSubresource() != "" || a.GetName() != "" {
		return authorizer.DecisionNoOpinion, "", nil
	}
	switch {
	case a.GetAPIGroup() == authenticationv1.GroupName && a.GetResource() == "selfsubjectreviews",
		a.GetAPIGroup() == authorizationv1.GroupName && (a.GetResource() == "selfsubjectaccessreviews" || a.GetResource() == "selfsubjectrulesreviews"):
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
})

// Forbidden is the error Kubernetes answers a denied request with: a 403
// Status naming the user, the verb and the resource (with its API group and
// namespace) or the path, and the authorizer's reason when it gave one:
//
//	widgets.example.dev is forbidden: User "ann" cannot list resource
//	"widgets" in API group "example.dev" in the namespace "ns"
func Forbidden(attrs authorizer.Attributes, reason string) *apierrors.StatusError {
	return responsewriters.ForbiddenStatusError(attrs, reason)
}

// Allowed tells whether the request's user may do what attrs describes,
// with az as Decider builds it. A decision an authorizer could not make (an
// error without an allow) is logged to log and returned as an internal
// error that does not show it; a denial is a Forbidden error.
func Allowed(ctx context.Context, az authorizer.Authorizer, attrs authorizer.Attributes, log *slog.Logger) error {
	d, reason, err := az.Authorize(ctx, attrs)
	if d == authorizer.DecisionAllow {
		return nil
	}
	if err != nil {
		log.ErrorContext(ctx, "authorizer failed", "verb", attrs.GetVerb(), "resource", attrs.GetResource(), "user", attrs.GetUser().GetName(), "err", err)
		return apierrors.NewInternalError(errors.New("the request could not be authorized"))
	}
	return Forbidden(attrs, reason)
}

// Authorize returns a handler that decides every authenticated request with
// Decider(a) before next sees it, from the request's RequestInfo
// (Instrument sets it) and user (the authentication layer sets it), as
// kube-apiserver's WithAuthorization does (with the same attributes, whose
// selectors are parsed only when asked for): the verb is the one Kubernetes
// derives (get, list, watch, create, update, patch, delete,
// deletecollection; server-side apply and dry runs are patch and create
// like any other), and a path outside /api and /apis is a nonResourceURL
// (/metrics, /debug/pprof/..., discovery, OpenAPI). A denied request gets
// a 403 meta/v1 Status that says who may not do what; an authorizer's error
// without an allow gets a 500 that says nothing of it, and is logged. The
// request's audit event (when it has one) gets kube-apiserver's annotations
// authorization.k8s.io/decision (allow or forbid) and
// authorization.k8s.io/reason.
//
// Requests without a user are those the authentication layer serves
// without credentials, and the paths it serves so (the probes, /version and
// public, such as the web UI's static files, with their subpaths) need no
// decision for anyone: they are passed on undecided.
func Authorize(next http.Handler, a authorizer.Authorizer, log *slog.Logger, public ...string) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	az := Decider(a)
	public = append(slices.Clone(anonymousPaths), public...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if _, ok := request.UserFrom(ctx); !ok || under(r.URL.Path, public) {
			next.ServeHTTP(w, r)
			return
		}
		attrs, ok := requestAttributes(ctx)
		if !ok {
			log.ErrorContext(ctx, "request without request info", "path", r.URL.Path)
			WriteStatus(w, http.StatusInternalServerError, "InternalError", "the request could not be authorized")
			return
		}
		d, reason, err := az.Authorize(ctx, attrs)
		if d == authorizer.DecisionAllow {
			audit.AddAuditAnnotations(ctx, decisionAnnotation, "allow", reasonAnnotation, reason)
			next.ServeHTTP(w, r)
			return
		}
		if err != nil {
			audit.AddAuditAnnotation(ctx, reasonAnnotation, "internal error")
			log.ErrorContext(ctx, "authorizer failed", "path", r.URL.Path, "verb", attrs.GetVerb(), "user", attrs.GetUser().GetName(), "err", err)
			WriteStatus(w, http.StatusInternalServerError, "InternalError", "the request could not be authorized")
			return
		}
		audit.AddAuditAnnotations(ctx, decisionAnnotation, "forbid", reasonAnnotation, reason)
		writeStatusError(w, Forbidden(attrs, reason))
	})
}

// The audit annotations of the decision, as kube-apiserver writes them.
const (
	decisionAnnotation = "authorization.k8s.io/decision"
	reasonAnnotation   = "authorization.k8s.io/reason"
)

// writeStatusError answers with err's meta/v1 Status.
func writeStatusError(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.ErrStatus
	st.Kind, st.APIVersion = "Status", "v1"
	body, _ := json.Marshal(&st)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(body)
}

// lazyAttributes are a request's authorizer.Attributes as kube-apiserver's
// filters.GetAuthorizerAttributes builds them, except that the field and
// label selectors are parsed when an authorizer first asks for them: RBAC
// never does, and parsing a label selector costs several times the rest of
// a decision.
type lazyAttributes struct {
	authorizer.AttributesRecord
	fieldSelector, labelSelector string
	fieldOnce, labelOnce         sync.Once
}

// requestAttributes returns the attributes of the request whose context is
// ctx, from its user and RequestInfo; false when it has no RequestInfo.
func requestAttributes(ctx context.Context) (*lazyAttributes, bool) {
	info, ok := request.RequestInfoFrom(ctx)
	if !ok {
		return nil, false
	}
	u, _ := request.UserFrom(ctx)
	return &lazyAttributes{
		AttributesRecord: authorizer.AttributesRecord{
			User: u, ResourceRequest: info.IsResourceRequest, Path: info.Path, Verb: info.Verb,
			APIGroup: info.APIGroup, APIVersion: info.APIVersion, Resource: info.Resource,
			Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name,
		},
		fieldSelector: info.FieldSelector,
		labelSelector: info.LabelSelector,
	}, true
}

// GetFieldSelector parses the request's field selector on the first call.
func (a *lazyAttributes) GetFieldSelector() (fields.Requirements, error) {
	a.fieldOnce.Do(func() {
		if a.fieldSelector == "" {
			return
		}
		sel, err := fields.ParseSelector(a.fieldSelector)
		if err != nil {
			a.FieldSelectorParsingErr = err
			return
		}
		if reqs := sel.Requirements(); len(reqs) > 0 {
			a.FieldSelectorRequirements = reqs
		}
	})
	return a.FieldSelectorRequirements, a.FieldSelectorParsingErr
}

// GetLabelSelector parses the request's label selector on the first call.
func (a *lazyAttributes) GetLabelSelector() (labels.Requirements, error) {
	a.labelOnce.Do(func() {
		if a.labelSelector == "" {
			return
		}
		sel, err := labels.Parse(a.labelSelector)
		if err != nil {
			a.LabelSelectorParsingErr = err
			return
		}
		if reqs, _ := sel.Requirements(); len(reqs) > 0 {
			a.LabelSelectorRequirements = reqs
		}
	})
	return a.LabelSelectorRequirements, a.LabelSelectorParsingErr
}
