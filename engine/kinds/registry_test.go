package kinds

import (
	"testing"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestRegistryCRDRevisions checks that the registry applies the writes of a
// CRD in revision order whatever order they arrive in: an older write or
// delete never replaces a newer one, and a delete at rev 0 always removes.
func TestRegistryCRDRevisions(t *testing.T) {
	r := NewRegistry()
	crdObj := kindstest.WidgetCRD(t).Object
	if err := r.PrepareCRD(crdObj); err != nil {
		t.Fatal(err)
	}
	crd, err := CRDFromMap(crdObj)
	if err != nil {
		t.Fatal(err)
	}
	build := func() []*Kind {
		ss, err := r.BuildCRD(crd)
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	cur := func() int64 { return 10 }
	gen := r.Generation()
	first := build()
	r.SetCRD(crd, first, 5, nil, false, cur)
	if r.Generation() == gen {
		t.Error("serving a CRD left the generation unchanged")
	}
	got, ok := r.Get(widgets)
	if !ok || got != first[0] || !r.ServesCRD(crd.Name) || r.ByGroupResource(widgets.GroupResource()) != first[0] {
		t.Fatal("widgets not served after SetCRD")
	}
	if k, ok := r.ByKind(widgets.GroupVersion().WithKind("Widget")); !ok || k != first[0] {
		t.Error("ByKind does not find Widget")
	}

	r.SetCRD(crd, build(), 3, nil, false, cur)
	if got, _ := r.Get(widgets); got != first[0] {
		t.Error("a write older than the one applied replaced it")
	}
	r.RemoveCRD(crd.Name, 4)
	if !r.ServesCRD(crd.Name) {
		t.Error("a delete older than the write applied removed the CRD")
	}
	newer := build()
	r.SetCRD(crd, newer, 6, nil, false, cur)
	if got, _ := r.Get(widgets); got != newer[0] {
		t.Error("a newer write did not replace the older one")
	}
	r.RemoveCRD(crd.Name, 7)
	if r.ServesCRD(crd.Name) || r.ByGroupResource(widgets.GroupResource()) != nil || len(r.CRDs()) != 0 {
		t.Fatal("the CRD is still served after its delete")
	}
	r.SetCRD(crd, build(), 6, nil, false, cur)
	if r.ServesCRD(crd.Name) {
		t.Error("a write older than the delete served the CRD again")
	}
	r.SetCRD(crd, build(), 8, nil, false, cur)
	r.RemoveCRD(crd.Name, 0)
	if r.ServesCRD(crd.Name) {
		t.Error("RemoveCRD at revision 0 did not remove")
	}
	for _, gvr := range []schema.GroupVersionResource{NamespaceResource, EventResource, CRDResource} {
		if k, ok := r.Get(gvr); !ok || !k.Builtin {
			t.Errorf("%s not served as a built-in kind", gvr)
		}
	}
}

// TestRegistryFieldManagersReused checks that the registry reuses a CRD's
// field managers while what they are built from is the same, and builds
// new ones for a CRD it removed; registries share none.
func TestRegistryFieldManagersReused(t *testing.T) {
	r := NewRegistry()
	crd, err := CRDFromMap(kindstest.WidgetCRD(t).Object)
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.BuildCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	crd.Labels = map[string]string{"touched": "yes"}
	b, err := r.BuildCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	if a[0].FieldManager("") == nil || a[0].FieldManager("") != b[0].FieldManager("") {
		t.Error("a label-only change rebuilt the field managers")
	}
	if other, _ := NewRegistry().BuildCRD(crd); other[0].FieldManager("") == a[0].FieldManager("") {
		t.Error("two registries share field managers")
	}
	r.RemoveCRD(crd.Name, 0)
	c, err := r.BuildCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	if c[0].FieldManager("") == a[0].FieldManager("") {
		t.Error("the field managers of a removed CRD were reused")
	}
	// A built-in kind makes its own once, with one for its status.
	ns, _ := r.Get(NamespaceResource)
	if fm := ns.FieldManager(""); fm == nil || ns.FieldManager("") != fm || ns.FieldManager("status") == nil {
		t.Error("namespaces have no stable field managers")
	}
	if other, _ := NewRegistry().Get(NamespaceResource); other.FieldManager("") == ns.FieldManager("") {
		t.Error("two registries share the field managers of a built-in kind")
	}
}
