package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	endpointsrequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// The review APIs let a client ask who it is and what it, or someone else,
// may do: `kubectl auth whoami` (authentication.k8s.io/v1
// SelfSubjectReview), `kubectl auth can-i` (authorization.k8s.io/v1
// SelfSubjectAccessReview; with --as, the serving layer's impersonation
// makes it a review of the impersonated user), `kubectl auth can-i --list`
// (SelfSubjectRulesReview), and for controllers and admins reviewing
// others, SubjectAccessReview (cluster-wide) and LocalSubjectAccessReview
// (in one namespace). They are create-only and store nothing. Creating one
// is authorized like any other request (create on the review resource):
// Kubernetes' default roles let every authenticated user create the self
// reviews and admins the others. The answers come from
// Options.Authorizer behind the group system:masters (serving.Decider),
// the same decision the serving layer makes for the request itself.

// reviewResources are the review resources, served beside the engine's.
var reviewResources = []kinds.Resource{
	{GVR: authenticationv1.SchemeGroupVersion.WithResource("selfsubjectreviews"), Kind: "SelfSubjectReview", Singular: "selfsubjectreview"},
	{GVR: authorizationv1.SchemeGroupVersion.WithResource("localsubjectaccessreviews"), Kind: "LocalSubjectAccessReview", Singular: "localsubjectaccessreview", Namespaced: true},
	{GVR: authorizationv1.SchemeGroupVersion.WithResource("selfsubjectaccessreviews"), Kind: "SelfSubjectAccessReview", Singular: "selfsubjectaccessreview"},
	{GVR: authorizationv1.SchemeGroupVersion.WithResource("selfsubjectrulesreviews"), Kind: "SelfSubjectRulesReview", Singular: "selfsubjectrulesreview"},
	{GVR: authorizationv1.SchemeGroupVersion.WithResource("subjectaccessreviews"), Kind: "SubjectAccessReview", Singular: "subjectaccessreview"},
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

// reviewHandlers maps the path (a chi pattern) of each review resource to
// its handler, which answers any method but POST with 405.
func (s *Server) reviewHandlers() map[string]http.HandlerFunc {
	serves := map[string]http.HandlerFunc{
		"SelfSubjectReview":        s.serveSelfSubjectReview,
		"SelfSubjectAccessReview":  s.serveSelfSubjectAccessReview,
		"SelfSubjectRulesReview":   s.serveSelfSubjectRulesReview,
		"SubjectAccessReview":      s.serveSubjectAccessReview,
		"LocalSubjectAccessReview": s.serveLocalSubjectAccessReview,
	}
	out := map[string]http.HandlerFunc{}
	for _, res := range reviewResources {
		serve := serves[res.Kind]
		path := "/apis/" + res.GVR.Group + "/" + res.GVR.Version + "/" + res.GVR.Resource
		if res.Namespaced {
			path = "/apis/" + res.GVR.Group + "/" + res.GVR.Version + "/namespaces/{namespace}/" + res.GVR.Resource
		}
		out[path] = func(w http.ResponseWriter, r *http.Request) {
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
	// kube-apiserver stamps the review with the time it answered it.
	rev.CreationTimestamp = metav1.Now()
	rev.APIVersion, rev.Kind = authenticationv1.SchemeGroupVersion.String(), "SelfSubjectReview"
	writeObject(w, r, http.StatusCreated, &rev)
}

// invalidReview is the 422 of a review whose spec is invalid at path.
func invalidReview(kind string, path *field.Path, value any, msg string) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName, Kind: kind}, "",
		field.ErrorList{field.Invalid(path, value, msg)})
}

// checkAttributes checks that a review asks about exactly one of a
// resource and a path, as Kubernetes' validation does.
func checkAttributes(kind string, spec any, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) error {
	if (res == nil) == (nonRes == nil) {
		return invalidReview(kind, field.NewPath("spec"), spec, "exactly one of nonResourceAttributes or resourceAttributes must be specified")
	}
	return nil
}

// reviewAttributes are the authorizer's attributes for a review of u, as
// Kubernetes builds them: an empty version matches every version.
func reviewAttributes(u user.Info, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) authorizer.AttributesRecord {
	if nonRes != nil {
		return authorizer.AttributesRecord{User: u, Verb: nonRes.Verb, Path: nonRes.Path}
	}
	version := res.Version
	if version == "" {
		version = "*"
	}
	return authorizer.AttributesRecord{
		User: u, Verb: res.Verb, Namespace: res.Namespace, APIGroup: res.Group, APIVersion: version,
		Resource: res.Resource, Subresource: res.Subresource, Name: res.Name, ResourceRequest: true,
	}
}

// decide answers a review of attrs: allowed, denied (only when an
// authorizer denied outright), the reason and an evaluation error.
func (s *Server) decide(ctx context.Context, attrs authorizer.AttributesRecord) authorizationv1.SubjectAccessReviewStatus {
	d, reason, err := s.authz.Authorize(ctx, attrs)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authorizer.DecisionAllow, Denied: d == authorizer.DecisionDeny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	switch {
	case st.Reason != "":
	case st.Allowed && mayDoEverything(attrs.User):
		st.Reason = fmt.Sprintf("%s is in %s, which may do everything", attrs.User.GetName(), user.SystemPrivilegedGroup)
	case !st.Allowed && s.opts.Authorizer == nil:
		st.Reason = "only the group " + user.SystemPrivilegedGroup + " is authorized"
	}
	return st
}

func (s *Server) serveSelfSubjectAccessReview(w http.ResponseWriter, r *http.Request) {
	var rev authorizationv1.SelfSubjectAccessReview
	u, err := s.readReview(w, r, "SelfSubjectAccessReview", &rev)
	if err == nil {
		err = checkAttributes("SelfSubjectAccessReview", rev.Spec, rev.Spec.ResourceAttributes, rev.Spec.NonResourceAttributes)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	rev.Status = s.decide(r.Context(), reviewAttributes(u, rev.Spec.ResourceAttributes, rev.Spec.NonResourceAttributes))
	rev.APIVersion, rev.Kind = authorizationv1.SchemeGroupVersion.String(), "SelfSubjectAccessReview"
	writeObject(w, r, http.StatusCreated, &rev)
}

// subject is the user a SubjectAccessReview asks about.
func subject(spec authorizationv1.SubjectAccessReviewSpec) user.Info {
	u := &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	for k, v := range spec.Extra {
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = v
	}
	return u
}

// checkSubjectAccessReview checks a SubjectAccessReview's or a
// LocalSubjectAccessReview's spec as Kubernetes' validation does.
func checkSubjectAccessReview(kind string, spec authorizationv1.SubjectAccessReviewSpec) error {
	if err := checkAttributes(kind, spec, spec.ResourceAttributes, spec.NonResourceAttributes); err != nil {
		return err
	}
	if spec.User == "" && len(spec.Groups) == 0 {
		return invalidReview(kind, field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified")
	}
	return nil
}

func (s *Server) serveSubjectAccessReview(w http.ResponseWriter, r *http.Request) {
	var rev authorizationv1.SubjectAccessReview
	_, err := s.readReview(w, r, "SubjectAccessReview", &rev)
	if err == nil {
		err = checkSubjectAccessReview("SubjectAccessReview", rev.Spec)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	rev.Status = s.decide(r.Context(), reviewAttributes(subject(rev.Spec), rev.Spec.ResourceAttributes, rev.Spec.NonResourceAttributes))
	rev.APIVersion, rev.Kind = authorizationv1.SchemeGroupVersion.String(), "SubjectAccessReview"
	writeObject(w, r, http.StatusCreated, &rev)
}

func (s *Server) serveLocalSubjectAccessReview(w http.ResponseWriter, r *http.Request) {
	var rev authorizationv1.LocalSubjectAccessReview
	ns := chi.URLParam(r, "namespace")
	_, err := s.readReview(w, r, "LocalSubjectAccessReview", &rev)
	switch {
	case err != nil:
	case rev.Spec.NonResourceAttributes != nil:
		err = invalidReview("LocalSubjectAccessReview", field.NewPath("spec", "nonResourceAttributes"), rev.Spec.NonResourceAttributes, "disallowed on this kind of request")
	case rev.Spec.ResourceAttributes == nil:
		err = invalidReview("LocalSubjectAccessReview", field.NewPath("spec", "resourceAttributes"), rev.Spec.ResourceAttributes, "resourceAttributes is required")
	case rev.Namespace != "" && rev.Namespace != ns, rev.Spec.ResourceAttributes.Namespace != ns:
		err = apierrors.NewBadRequest("spec.resourceAttributes.namespace must match namespace: " + ns)
	default:
		err = checkSubjectAccessReview("LocalSubjectAccessReview", rev.Spec)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	rev.Namespace = ns
	rev.Status = s.decide(r.Context(), reviewAttributes(subject(rev.Spec), rev.Spec.ResourceAttributes, nil))
	rev.APIVersion, rev.Kind = authorizationv1.SchemeGroupVersion.String(), "LocalSubjectAccessReview"
	writeObject(w, r, http.StatusCreated, &rev)
}

// allResourceRules and allNonResourceRules are the rules of a member of
// system:masters on a server without a rule resolver.
var (
	allResourceRules    = []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}
	allNonResourceRules = []authorizationv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}
)

func (s *Server) serveSelfSubjectRulesReview(w http.ResponseWriter, r *http.Request) {
	var rev authorizationv1.SelfSubjectRulesReview
	u, err := s.readReview(w, r, "SelfSubjectRulesReview", &rev)
	if err != nil {
		writeError(w, err)
		return
	}
	rev.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	switch {
	case s.rules != nil:
		// Kubernetes lists the rules of RBAC's bindings, for
		// system:masters too: cluster-admin's, which the default binding
		// gives the group, and those every authenticated user is bound to.
		res, nonRes, incomplete, err := s.rules.RulesFor(r.Context(), u, rev.Spec.Namespace)
		for _, rule := range res {
			rev.Status.ResourceRules = append(rev.Status.ResourceRules, authorizationv1.ResourceRule{
				Verbs: rule.GetVerbs(), APIGroups: rule.GetAPIGroups(), Resources: rule.GetResources(), ResourceNames: rule.GetResourceNames()})
		}
		for _, rule := range nonRes {
			rev.Status.NonResourceRules = append(rev.Status.NonResourceRules, authorizationv1.NonResourceRule{
				Verbs: rule.GetVerbs(), NonResourceURLs: rule.GetNonResourceURLs()})
		}
		rev.Status.Incomplete = incomplete
		if err != nil {
			rev.Status.EvaluationError = err.Error()
		}
	case mayDoEverything(u):
		rev.Status.ResourceRules, rev.Status.NonResourceRules = allResourceRules, allNonResourceRules
	case s.opts.Authorizer != nil:
		// An authorizer that cannot list rules: the empty list is not all.
		rev.Status.Incomplete = true
	}
	rev.APIVersion, rev.Kind = authorizationv1.SchemeGroupVersion.String(), "SelfSubjectRulesReview"
	writeObject(w, r, http.StatusCreated, &rev)
}
