package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	endpointsrequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
)

// asUser serves ts's API to requests authenticated as u.
func asUser(t *testing.T, ts *testServer, u user.Info) *testServer {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.api.ServeHTTP(w, r.WithContext(endpointsrequest.WithUser(r.Context(), u)))
	}))
	t.Cleanup(hs.Close)
	return &testServer{Server: hs, api: ts.api, eng: ts.eng, db: ts.db}
}

func TestSelfReviews(t *testing.T) {
	base := newTestServer(t)
	admin := asUser(t, base, serving.AdminUser)
	other := asUser(t, base, &user.DefaultInfo{Name: "someone", Groups: []string{user.AllAuthenticated}})
	const (
		ssar  = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
		ssrr  = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
		whoam = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	)
	canI := `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"create","group":"example.setpoint.dev","resource":"widgets","namespace":"default"}}}`

	t.Run("the admin may do everything", func(t *testing.T) {
		var rev authorizationv1.SelfSubjectAccessReview
		if err := json.Unmarshal(admin.mustDo(t, http.StatusCreated, request{method: "POST", path: ssar, body: canI}), &rev); err != nil {
			t.Fatal(err)
		}
		if !rev.Status.Allowed || rev.Status.Reason == "" || rev.Kind != "SelfSubjectAccessReview" || rev.Spec.ResourceAttributes.Resource != "widgets" {
			t.Errorf("review of the admin: %+v", rev)
		}
		nonResource := `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"nonResourceAttributes":{"verb":"get","path":"/healthz"}}}`
		if err := json.Unmarshal(admin.mustDo(t, http.StatusCreated, request{method: "POST", path: ssar, body: nonResource}), &rev); err != nil || !rev.Status.Allowed {
			t.Errorf("non-resource review of the admin: %+v %v", rev.Status, err)
		}
		var rules authorizationv1.SelfSubjectRulesReview
		body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"default"}}`
		if err := json.Unmarshal(admin.mustDo(t, http.StatusCreated, request{method: "POST", path: ssrr, body: body}), &rules); err != nil {
			t.Fatal(err)
		}
		if len(rules.Status.ResourceRules) != 1 || !slices.Equal(rules.Status.ResourceRules[0].Verbs, []string{"*"}) ||
			!slices.Equal(rules.Status.ResourceRules[0].Resources, []string{"*"}) || len(rules.Status.NonResourceRules) != 1 {
			t.Errorf("rules of the admin: %+v", rules.Status)
		}
		var who authenticationv1.SelfSubjectReview
		if err := json.Unmarshal(admin.mustDo(t, http.StatusCreated, request{method: "POST", path: whoam,
			contentType: "application/yaml", body: "apiVersion: authentication.k8s.io/v1\nkind: SelfSubjectReview\n"}), &who); err != nil {
			t.Fatal(err)
		}
		if who.Status.UserInfo.Username != "setpoint-admin" || !slices.Contains(who.Status.UserInfo.Groups, user.SystemPrivilegedGroup) {
			t.Errorf("whoami: %+v", who.Status.UserInfo)
		}
	})

	t.Run("anyone else may do nothing", func(t *testing.T) {
		var rev authorizationv1.SelfSubjectAccessReview
		if err := json.Unmarshal(other.mustDo(t, http.StatusCreated, request{method: "POST", path: ssar, body: canI}), &rev); err != nil || rev.Status.Allowed {
			t.Errorf("review of another user: %+v %v", rev.Status, err)
		}
		var rules authorizationv1.SelfSubjectRulesReview
		body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{}}`
		if err := json.Unmarshal(other.mustDo(t, http.StatusCreated, request{method: "POST", path: ssrr, body: body}), &rules); err != nil ||
			len(rules.Status.ResourceRules) != 0 || len(rules.Status.NonResourceRules) != 0 {
			t.Errorf("rules of another user: %+v %v", rules.Status, err)
		}
	})

	t.Run("bad reviews", func(t *testing.T) {
		for _, tt := range []struct {
			name, method, path, body string
			code                     int
			contains                 string
		}{
			{"neither attribute", "POST", ssar, `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{}}`, 422, "exactly one of nonResourceAttributes or resourceAttributes"},
			{"both attributes", "POST", ssar, `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{},"nonResourceAttributes":{}}}`, 422, "exactly one of"},
			{"another kind", "POST", ssar, `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{}}`, 400, "not a authorization.k8s.io/v1, Kind=SelfSubjectAccessReview"},
			{"an unknown field", "POST", ssar, `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verbb":"get"}}}`, 400, "verbb"},
			{"not JSON", "POST", whoam, `{`, 400, ""},
			{"reviews are not stored", "GET", ssar, "", 405, ""},
		} {
			code, b, _ := admin.do(t, request{method: tt.method, path: tt.path, body: tt.body})
			var st metav1.Status
			if code != tt.code || !strings.Contains(string(b), tt.contains) || json.Unmarshal(b, &st) != nil || st.Kind != "Status" {
				t.Errorf("%s: %d %s; want %d with %q in a Status", tt.name, code, b, tt.code, tt.contains)
			}
		}
		// Without an authenticated user (the serving layer always sets one)
		// the review cannot answer for anybody.
		base.mustDo(t, http.StatusUnauthorized, request{method: "POST", path: ssar, body: canI})
	})

	t.Run("discovery lists them as create-only", func(t *testing.T) {
		var list metav1.APIResourceList
		if err := json.Unmarshal(admin.mustDo(t, http.StatusOK, request{path: "/apis/authorization.k8s.io/v1"}), &list); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range list.APIResources {
			names = append(names, r.Name)
			if !slices.Equal(r.Verbs, []string{"create"}) || r.Namespaced != (r.Name == "localsubjectaccessreviews") {
				t.Errorf("%s: verbs %v, namespaced %v", r.Name, r.Verbs, r.Namespaced)
			}
		}
		if !slices.Equal(names, []string{"localsubjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews"}) {
			t.Errorf("authorization.k8s.io/v1 serves %v", names)
		}
		agg := string(admin.mustDo(t, http.StatusOK, request{path: "/apis", accept: aggregatedType}))
		if !strings.Contains(agg, `"resource":"selfsubjectreviews"`) || !strings.Contains(agg, `"name":"authentication.k8s.io"`) {
			t.Errorf("aggregated discovery lacks the self reviews: %.400s", agg)
		}
	})
}
