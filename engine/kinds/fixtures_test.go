package kinds

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var widgets = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}

// newRegistry returns a registry serving the built-in kinds and the Widget
// CRD of examples/widget.
func newRegistry(t testing.TB) *Registry {
	t.Helper()
	r := NewRegistry()
	serveCRD(t, r, readYAML(t, "../../examples/widget/crd.yaml"))
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
	r.SetCRD(c, ss, rev, nil, func() int64 { return rev })
}

func readYAML(t testing.TB, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fromYAML(t, string(b))
}

func fromYAML(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}
