package kinds

import (
	"testing"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var widgets = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}

// newRegistry returns a registry serving the built-in kinds and the Widget
// CRD of examples/widget.
func newRegistry(t testing.TB) *Registry {
	t.Helper()
	r := NewRegistry()
	serveCRD(t, r, kindstest.WidgetCRD(t))
	return r
}

// serveCRD registers the kinds of crd in r as a write of it does: the
// CRD's status prepared, its kinds built and set.
func serveCRD(t testing.TB, r *Registry, crd *unstructured.Unstructured) {
	t.Helper()
	obj := crd.DeepCopy().Object
	if err := r.PrepareCRD(obj); err != nil {
		t.Fatalf("prepare CRD: %v", err)
	}
	c, err := CRDFromMap(obj)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := r.BuildCRD(c)
	if err != nil {
		t.Fatalf("build CRD: %v", err)
	}
	rev := int64(len(r.CRDs()) + 1)
	r.SetCRD(c, ss, rev, nil, false, func() int64 { return rev })
}
