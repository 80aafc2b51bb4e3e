package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestApplyPatch drives server-side apply over HTTP: a YAML body creates
// (201), a re-apply answers 200, a conflict is a 409 Status with one cause
// per field, and other writes record their manager from the User-Agent.
func TestApplyPatch(t *testing.T) {
	ts := newTestServer(t)
	ts.registerWidget(t)
	const ct = "application/apply-patch+yaml"
	manifest := func(size string) string {
		return "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: a\nspec:\n  name: A\n  size: " + size + "\n"
	}
	decode := func(b []byte) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(b, &u.Object); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		return u
	}

	b := ts.mustDo(t, http.StatusCreated, request{method: "PATCH", path: widgetsPath + "/a?fieldManager=alice", contentType: ct, body: manifest("small")})
	if mf := decode(b).GetManagedFields(); len(mf) != 1 || mf[0].Manager != "alice" || mf[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("managedFields after create: %+v", mf)
	}
	ts.mustDo(t, http.StatusOK, request{method: "PATCH", path: widgetsPath + "/a?fieldManager=alice", contentType: ct, body: manifest("medium")})

	b = ts.mustDo(t, http.StatusConflict, request{method: "PATCH", path: widgetsPath + "/a?fieldManager=bob", contentType: ct, body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":"large"}}`})
	st := status(t, b)
	if st.Reason != metav1.StatusReasonConflict || st.Details == nil || len(st.Details.Causes) != 1 ||
		st.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict || st.Details.Causes[0].Field != ".spec.size" ||
		!strings.Contains(st.Details.Causes[0].Message, `"alice"`) {
		t.Fatalf("conflict: %s", b)
	}
	ts.mustDo(t, http.StatusOK, request{method: "PATCH", path: widgetsPath + "/a?fieldManager=bob&force=true", contentType: ct, body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":"large"}}`})

	// A merge patch is recorded under the User-Agent's prefix.
	rq, err := http.NewRequest("PATCH", ts.URL+widgetsPath+"/a", strings.NewReader(`{"metadata":{"labels":{"x":"y"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	rq.Header.Set("Content-Type", "application/merge-patch+json")
	rq.Header.Set("User-Agent", "my-tool/1.0 (linux)")
	resp, err := ts.Client().Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got unstructured.Unstructured
	if err := json.NewDecoder(resp.Body).Decode(&got.Object); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("merge patch: %d %v", resp.StatusCode, err)
	}
	found := false
	for _, e := range got.GetManagedFields() {
		found = found || (e.Manager == "my-tool" && e.Operation == metav1.ManagedFieldsOperationUpdate)
	}
	if !found {
		t.Fatalf("no my-tool Update entry in %+v", got.GetManagedFields())
	}

	// force is for apply only; a dry run stores nothing.
	ts.mustDo(t, http.StatusUnprocessableEntity, request{method: "PATCH", path: widgetsPath + "/a?force=true", contentType: "application/merge-patch+json", body: `{}`})
	ts.mustDo(t, http.StatusCreated, request{method: "PATCH", path: widgetsPath + "/b?fieldManager=m&dryRun=All", contentType: ct, body: strings.Replace(manifest("small"), "name: a", "name: b", 1)})
	ts.mustDo(t, http.StatusNotFound, request{path: widgetsPath + "/b"})
}
