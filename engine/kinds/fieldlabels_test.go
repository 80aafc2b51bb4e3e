package kinds

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestFieldLabel checks which field labels each kind takes: the Event and
// Namespace fields Kubernetes allows, by path; a CRD's selectable fields,
// through the strategy's attributes; nothing else.
func TestFieldLabel(t *testing.T) {
	r := NewRegistry()
	serveCRD(t, r, testsupport.CRD{Kind: "Gizmo", SelectableFields: []string{".spec.tier"},
		Schema: `{type: object, properties: {spec: {type: object, properties: {tier: {type: string}, size: {type: string}}}}}`}.Unstructured())
	events, _ := r.Get(EventResource)
	namespaces, _ := r.Get(NamespaceResource)
	secrets, _ := r.Get(SecretResource)
	gizmos, ok := r.Get(widgets.GroupVersion().WithResource("gizmos"))
	if !ok {
		t.Fatal("gizmos not served")
	}
	for _, tc := range []struct {
		name  string
		kind  *Kind
		label string
		path  []string
		attrs bool
	}{
		{"event reason", events, "reason", []string{"reason"}, false},
		{"event source", events, "source", []string{"source", "component"}, false},
		{"event involved object", events, "involvedObject.uid", []string{"involvedObject", "uid"}, false},
		{"namespace phase", namespaces, "status.phase", []string{"status", "phase"}, false},
		{"secret type", secrets, "type", []string{"type"}, false},
		{"selectable field", gizmos, "spec.tier", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, attrs, ok := tc.kind.FieldLabel(tc.label)
			if !ok || !slices.Equal(path, tc.path) || (attrs != nil) != tc.attrs {
				t.Fatalf("FieldLabel(%q) = %v, attrs %v, %v; want %v, attrs %v", tc.label, path, attrs != nil, ok, tc.path, tc.attrs)
			}
			if attrs == nil {
				return
			}
			g := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"tier": "gold"}}}
			if _, fs, err := attrs(g); err != nil || fs.Get("spec.tier") != "gold" {
				t.Errorf("attrs = %v, %v; want spec.tier gold", fs, err)
			}
		})
	}
	for _, tc := range []struct {
		kind  *Kind
		label string
	}{
		{namespaces, "reason"}, {events, "status.phase"}, {gizmos, "spec.size"}, {gizmos, "status.phase"}, {secrets, "data.a"},
	} {
		if _, _, ok := tc.kind.FieldLabel(tc.label); ok {
			t.Errorf("%s takes the field label %q", tc.kind.Kind, tc.label)
		}
	}
}

// TestFieldLabelError: a field label a kind does not take is refused with
// kube-apiserver's message, which depends on whether the kind has field
// label conversions of its own.
func TestFieldLabelError(t *testing.T) {
	r := NewRegistry()
	serveCRD(t, r, testsupport.CRD{Kind: "Gizmo", Schema: `{type: object}`}.Unstructured())
	for _, tc := range []struct {
		gvr  schema.GroupVersionResource
		want string
	}{
		{ConfigMapResource, `"data.a" is not a known field selector: only "metadata.name", "metadata.namespace"`},
		{ServiceAccountResource, `"data.a" is not a known field selector: only "metadata.name", "metadata.namespace"`},
		{CRDResource, `"data.a" is not a known field selector: only "metadata.name", "metadata.namespace"`},
		{SecretResource, "field label not supported: data.a"},
		{EventResource, "field label not supported: data.a"},
		{NamespaceResource, "field label not supported: data.a"},
		{widgets.GroupVersion().WithResource("gizmos"), "field label not supported: data.a"},
	} {
		k, ok := r.Get(tc.gvr)
		if !ok {
			t.Fatalf("%v not served", tc.gvr)
		}
		if got := k.FieldLabelError("data.a"); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.gvr.Resource, got, tc.want)
		}
	}
}
