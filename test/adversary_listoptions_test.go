package test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestListOptionsKubeRefuses sends the built server the combinations of
// list and watch options that kube-apiserver refuses (ValidateListOptions:
// 422 Invalid, kind ListOptions) and checks that they are refused rather
// than served as something else: a watch with resourceVersionMatch=Exact
// and sendInitialEvents would otherwise send the current objects, not those
// at the revision asked for. The combinations kube-apiserver serves still
// work.
func TestListOptionsKubeRefuses(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	const cms = "/api/v1/namespaces/default/configmaps"
	if code, b, err := s.Do("POST", cms, s.Token, strings.NewReader(`{"metadata":{"name":"a"},"data":{"k":"v"}}`)); err != nil || code != 201 {
		t.Fatalf("create: %d %s %v", code, b, err)
	}
	refused := []struct {
		name, query, field string
	}{
		{"watch with resourceVersionMatch alone", "?watch=1&resourceVersion=1&resourceVersionMatch=NotOlderThan", "resourceVersionMatch"},
		{"watch with sendInitialEvents and Exact", "?watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1", "resourceVersionMatch"},
		{"watch with sendInitialEvents alone", "?watch=1&sendInitialEvents=true", "resourceVersionMatch"},
		{"list with sendInitialEvents", "?sendInitialEvents=true", "sendInitialEvents"},
		{"list with Exact at 0", "?resourceVersion=0&resourceVersionMatch=Exact", "resourceVersionMatch"},
		{"list with resourceVersionMatch alone", "?resourceVersionMatch=NotOlderThan", "resourceVersionMatch"},
		{"list with an unknown match", "?resourceVersion=1&resourceVersionMatch=Newest", "resourceVersionMatch"},
		{"delete collection with sendInitialEvents", "?sendInitialEvents=false", "sendInitialEvents"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			method := "GET"
			if tc.name == "delete collection with sendInitialEvents" {
				method = "DELETE"
			}
			code, b, err := s.DoWith(method, cms+tc.query, s.Token, nil, testserver.DoOptions{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var st metav1.Status
			if err := json.Unmarshal(b, &st); err != nil || st.Kind != "Status" {
				t.Fatalf("%d %.300s: not a Status", code, b)
			}
			if code != 422 || st.Reason != metav1.StatusReasonInvalid || st.Details == nil || st.Details.Kind != "ListOptions" {
				t.Fatalf("got %d %s (%s); want 422 Invalid for ListOptions", code, st.Reason, st.Message)
			}
			found := false
			for _, c := range st.Details.Causes {
				found = found || c.Field == tc.field
			}
			if !found {
				t.Fatalf("no cause for %s in %s", tc.field, b)
			}
		})
	}
	// The collection is whole: the refused delete deleted nothing.
	if code, b, _ := s.Do("GET", cms+"/a", s.Token, nil); code != 200 {
		t.Fatalf("configmap after the refused delete: %d %s", code, b)
	}
	t.Run("served: watch-list", func(t *testing.T) {
		code, b, err := s.DoWith("GET", cms+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
			s.Token, nil, testserver.DoOptions{Timeout: 10 * time.Second})
		if err != nil || code != 200 {
			t.Fatalf("%d %.300s %v", code, b, err)
		}
	})
	t.Run("served: list at a revision", func(t *testing.T) {
		code, b, err := s.Do("GET", cms+"?resourceVersion=0&resourceVersionMatch=NotOlderThan", s.Token, nil)
		if err != nil || code != 200 {
			t.Fatalf("%d %.300s %v", code, b, err)
		}
	})
}
