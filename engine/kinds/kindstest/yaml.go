package kindstest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// FromYAML returns the object of the YAML document s.
func FromYAML(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

// WidgetCRD returns the CRD of examples/widget, read from the repository
// whichever package's test asks.
func WidgetCRD(t testing.TB) *unstructured.Unstructured {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("kindstest: no source path")
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "../../../examples/widget/crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return FromYAML(t, string(b))
}
