package engine

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// auditRecord is one write a recordingAuditor saw, and how it ended.
type auditRecord struct {
	User, Verb, Resource, Subresource, Namespace, Name string
	Code                                               int
	Body, Out                                          bool
}

// recordingAuditor keeps the writes AuditWrite is given.
type recordingAuditor struct {
	mu   sync.Mutex
	seen []auditRecord
}

func (a *recordingAuditor) AuditWrite(_ context.Context, attrs authorizer.Attributes, body runtime.Object) func(runtime.Object, error) {
	r := auditRecord{User: attrs.GetUser().GetName(), Verb: attrs.GetVerb(), Resource: attrs.GetResource(),
		Subresource: attrs.GetSubresource(), Namespace: attrs.GetNamespace(), Name: attrs.GetName(), Body: body != nil}
	return func(out runtime.Object, err error) {
		r.Code, r.Out = http.StatusOK, out != nil
		if err != nil {
			r.Code = http.StatusInternalServerError
			var st apierrors.APIStatus
			if errors.As(err, &st) {
				r.Code = int(st.Status().Code)
			}
		}
		a.mu.Lock()
		a.seen = append(a.seen, r)
		a.mu.Unlock()
	}
}

func (a *recordingAuditor) take() []auditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.seen
	a.seen = nil
	return out
}

// TestAuditSystemWrites checks that the writes made as one of the server's
// identities (WithSystemUser) reach the Auditor, one record each with the
// verb, object and outcome, and that no other write does: an API request's
// or a plugin's (a context with a user) is audited by whoever set the
// user.
func TestAuditSystemWrites(t *testing.T) {
	s := newService(t)
	rec := &recordingAuditor{}
	s.opts.Auditor = rec
	bg := context.Background()
	sys := WithSystemUser(bg, SystemUser("system:setpoint:test"))
	withUser := request.WithUser(sys, &user.DefaultInfo{Name: "alice"})

	w, err := s.Create(sys, widgets, widget("a", "small", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Object["status"] = map[string]any{"state": "ready"}
	if w, err = s.UpdateStatus(sys, widgets, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.SetLabels(map[string]string{"x": "y"})
	if _, err = s.Update(sys, widgets, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Patch(sys, widgets, "default", "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"z"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(sys, widgets, "default", "b", []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"b","namespace":"default"},"spec":{"name":"b","size":"small"}}`), metav1.PatchOptions{FieldManager: "t"}); err != nil {
		t.Fatal(err)
	}
	// Not the server's own: no record.
	if _, err := s.Create(bg, widgets, widget("c", "small", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(withUser, widgets, "default", "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(sys, widgets, "default", "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(sys, widgets, "default", "a", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("second delete: %v, want not found", err)
	}

	u := "system:setpoint:test"
	want := []auditRecord{
		{User: u, Verb: "create", Resource: "widgets", Namespace: "default", Code: 200, Body: true, Out: true},
		{User: u, Verb: "update", Resource: "widgets", Subresource: "status", Namespace: "default", Name: "a", Code: 200, Body: true, Out: true},
		{User: u, Verb: "update", Resource: "widgets", Namespace: "default", Name: "a", Code: 200, Body: true, Out: true},
		{User: u, Verb: "patch", Resource: "widgets", Namespace: "default", Name: "a", Code: 200, Body: true, Out: true},
		{User: u, Verb: "patch", Resource: "widgets", Namespace: "default", Name: "b", Code: 200, Body: true, Out: true},
		{User: u, Verb: "delete", Resource: "widgets", Namespace: "default", Name: "a", Code: 200, Body: true, Out: true},
		{User: u, Verb: "delete", Resource: "widgets", Namespace: "default", Name: "a", Code: 404, Body: true},
	}
	if diff := cmp.Diff(want, rec.take()); diff != "" {
		t.Errorf("audited writes (-want +got):\n%s", diff)
	}

	// No auditor: nothing is recorded, and the writes work as before.
	s.opts.Auditor = nil
	if _, err := s.Create(sys, widgets, widget("d", "small", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("recorded %v with no auditor", got)
	}
}
