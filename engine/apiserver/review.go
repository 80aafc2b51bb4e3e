package apiserver

import (
	"fmt"
	"net/http"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	endpointsrequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// The self-review APIs let a client ask who it is and what it may do:
// `kubectl auth whoami` (authentication.k8s.io/v1 SelfSubjectReview),
// `kubectl auth can-i` (authorization.k8s.io/v1 SelfSubjectAccessReview) and
// `kubectl auth can-i --list` (SelfSubjectRulesReview), which dashboards and
// operators also call before they act. They are create-only and store
// nothing. Setpoint's one API identity is the admin, in the privileged group
// that may do everything, so every review of it allows; a user outside that
// group (none authenticates today) is allowed nothing.

// reviewResources are the self-review resources, served beside the engine's.
var reviewResources = []kinds.Resource{
	{GVR: authenticationv1.SchemeGroupVersion.WithResource("selfsubjectreviews"), Kind: "SelfSubjectReview", Singular: "selfsubjectreview"},
	{GVR: authorizationv1.SchemeGroupVersion.WithResource("selfsubjectaccessreviews"), Kind: "SelfSubjectAccessReview", Singular: "selfsubjectaccessreview"},
	{GVR: authorizationv1.SchemeGroupVersion.WithResource("selfsubjectrulesreviews"), Kind: "SelfSubjectRulesReview", Singular: "selfsubjectrulesreview"},
}

// createOnly are the verbs of a review resource.
var createOnly = metav1.Verbs{"create"}

// verbsOf returns the discovery verbs of res.
func verbsOf(res kinds.Resource) metav1.Verbs {
	if isReview(res.GVR) {
		return createOnly
	}
	return objectVerbs
}

func isReview(gvr schema.GroupVersionResource) bool {
	return slices.ContainsFunc(reviewResources, func(r kinds.Resource) bool { return r.GVR == gvr })
}

// reviewHandlers maps the path of each review resource to its handler,
// which answers any method but POST with 405.
func (s *Server) reviewHandlers() map[string]http.HandlerFunc {
	serves := map[string]http.HandlerFunc{
		"SelfSubjectReview":       s.serveSelfSubjectReview,
		"SelfSubjectAccessReview": s.serveSelfSubjectAccessReview,
		"SelfSubjectRulesReview":  s.serveSelfSubjectRulesReview,
	}
	out := map[string]http.HandlerFunc{}
	for _, res := range reviewResources {
		serve := serves[res.Kind]
		out["/apis/"+res.GVR.Group+"/"+res.GVR.Version+"/"+res.GVR.Resource] = func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				writeError(w, methodNotAllowed(r))
				return
			}
			serve(w, r)
		}
	}
	return out
}

// mayDoEverything tells whether u is in the privileged group.
func mayDoEverything(u user.Info) bool {
	return slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup)
}

// readReview decodes a review of the type of into from the request body,
// refusing one of another kind.
func (s *Server) readReview(w http.ResponseWriter, r *http.Request, kind string, into runtime.Object) (user.Info, error) {
	i := slices.IndexFunc(reviewResources, func(res kinds.Resource) bool { return res.Kind == kind })
	res := reviewResources[i]
	u, ok := endpointsrequest.UserFrom(r.Context())
	if !ok {
		return nil, apierrors.NewUnauthorized("no user")
	}
	body, err := readBody(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	obj, err := decodeObject(r, body)
	if err != nil {
		return nil, err
	}
	if gvk := obj.GroupVersionKind(); gvk != res.GVR.GroupVersion().WithKind(res.Kind) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s %s, not a %s", gvk.GroupVersion(), gvk.Kind, res.GVR.GroupVersion().WithKind(res.Kind)))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid %s: %v", res.Kind, err))
	}
	return u, nil
}

func (s *Server) serveSelfSubjectReview(w http.ResponseWriter, r *http.Request) {
	var rev authenticationv1.SelfSubjectReview
	u, err := s.readReview(w, r, "SelfSubjectReview", &rev)
	if err != nil {
		writeError(w, err)
		return
	}
	rev.Status.UserInfo = authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	for k, v := range u.GetExtra() {
		if rev.Status.UserInfo.Extra == nil {
			rev.Status.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
		}
		rev.Status.UserInfo.Extra[k] = v
	}
	rev.APIVersion, rev.Kind = authenticationv1.SchemeGroupVersion.String(), "SelfSubjectReview"
	writeObject(w, r, http.StatusCreated, &rev)
}

func (s *Server) serveSelfSubjectAccessReview(w http.ResponseWriter, r *http.Request) {
	var rev authorizationv1.SelfSubjectAccessReview
	u, err := s.readReview(w, r, "SelfSubjectAccessReview", &rev)
	if err != nil {
		writeError(w, err)
		return
	}
	if (rev.Spec.ResourceAttributes == nil) == (rev.Spec.NonResourceAttributes == nil) {
		writeError(w, apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName, Kind: "SelfSubjectAccessReview"}, "",
			field.ErrorList{field.Invalid(field.NewPath("spec"), rev.Spec, "exactly one of nonResourceAttributes or resourceAttributes must be specified")}))
		return
	}
	if mayDoEverything(u) {
		rev.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: fmt.Sprintf("%s is in %s, which may do everything", u.GetName(), user.SystemPrivilegedGroup)}
	} else {
		rev.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: false, Reason: "only the admin is authorized"}
	}
	rev.APIVersion, rev.Kind = authorizationv1.SchemeGroupVersion.String(), "SelfSubjectAccessReview"
	writeObject(w, r, http.StatusCreated, &rev)
}

func (s *Server) serveSelfSubjectRulesReview(w http.ResponseWriter, r *http.Request) {
	var rev authorizationv1.SelfSubjectRulesReview
	u, err := s.readReview(w, r, "SelfSubjectRulesReview", &rev)
	if err != nil {
		writeError(w, err)
		return
	}
	rev.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	if mayDoEverything(u) {
		rev.Status.ResourceRules = []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}
		rev.Status.NonResourceRules = []authorizationv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}
	}
	rev.APIVersion, rev.Kind = authorizationv1.SchemeGroupVersion.String(), "SelfSubjectRulesReview"
	writeObject(w, r, http.StatusCreated, &rev)
}
