package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// TestAuditSystemWritesOnce: a write that the Service makes through
// another of its audited methods (an apply given to Patch, a patch or
// update of /scale, a delete of a collection) is recorded once, as the
// write its caller made, never again by the inner method: a delete of a
// collection is one deletecollection, as kube-apiserver audits it.
func TestAuditSystemWritesOnce(t *testing.T) {
	s := newService(t)
	rec := &recordingAuditor{}
	s.opts.Auditor = rec
	bg := context.Background()
	sys := WithSystemUser(bg, SystemUser("system:setpoint:test"))
	if _, err := s.Create(bg, kinds.CRDResource, gadgetCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := []byte(`{"apiVersion":"test.setpoint.dev/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"replicas":2}}`)
	if _, err := s.Patch(sys, gadgetsV1, "", "g1", types.ApplyPatchType, cfg, applyOpts("deployer", false)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Patch(sys, gadgetsV1, "", "g1", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`),
		metav1.PatchOptions{FieldManager: "autoscaler"}, "scale"); err != nil {
		t.Fatal(err)
	}
	sc, err := s.GetScale(bg, gadgetsV1, "", "g1")
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(sc.Object, int64(7), "spec", "replicas")
	if _, err := s.UpdateScale(sys, gadgetsV1, "", "g1", sc, metav1.UpdateOptions{FieldManager: "hpa"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"w1", "w2"} {
		if _, err := s.Create(bg, widgets, widget(name, "small", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DeleteCollection(sys, widgets, "default", metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}

	u := "system:setpoint:test"
	want := []auditRecord{
		{User: u, Verb: "patch", Resource: "gadgets", Name: "g1", Code: 200, Body: true, Out: true},
		{User: u, Verb: "patch", Resource: "gadgets", Subresource: "scale", Name: "g1", Code: 200, Body: true, Out: true},
		{User: u, Verb: "update", Resource: "gadgets", Subresource: "scale", Name: "g1", Code: 200, Body: true, Out: true},
		{User: u, Verb: "deletecollection", Resource: "widgets", Namespace: "default", Code: 200, Body: true, Out: true},
	}
	if diff := cmp.Diff(want, rec.take()); diff != "" {
		t.Errorf("audited writes (-want +got):\n%s", diff)
	}
}
