package kinds

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// BenchmarkPruneBuiltin measures finding the unknown fields of built-in
// objects that have none (a Role of 8 rules, a ConfigMap of 1 KiB, the
// Widget CRD): coerce-top-level is Coerce pruning the top level only, the
// baseline; decoded is the strict decoding of the object into its Go type
// alone (what an object the walk does not pass costs besides; nothing for
// objects of only plain data fields, which need neither), schema the walk
// of the API's schema that spares it. Each includes a copy of the
// object, as a write makes one.
func BenchmarkPruneBuiltin(b *testing.B) {
	var rules []string
	for i := range 8 {
		rules = append(rules, fmt.Sprintf(`{apiGroups: [""], resources: [pods, pods%d], verbs: [get, list, watch]}`, i))
	}
	objs := []struct {
		name string
		gvr  schema.GroupVersionResource
		obj  *unstructured.Unstructured
	}{
		{"Role", RoleResource, kindstest.FromYAML(b, `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: r, namespace: default, labels: {a: b}}, rules: [`+strings.Join(rules, ", ")+`]}`)},
		{"ConfigMap1KiB", ConfigMapResource, kindstest.FromYAML(b, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}, data: {k: "`+strings.Repeat("x", 1024)+`"}}`)},
		{"Secret1KiB", SecretResource, kindstest.FromYAML(b, `{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: default}, data: {k: "`+strings.Repeat("eHh4", 256)+`"}}`)},
		{"CRD", CRDResource, kindstest.WidgetCRD(b)},
	}
	for _, o := range objs {
		sv, _ := NewRegistry().Get(o.gvr)
		bt, _ := newBuiltinTypes(sv)
		b.Run(o.name+"/coerce-top-level", func(b *testing.B) {
			sv, _ := NewRegistry().Get(o.gvr)
			sv.typed = nil
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sv.Coerce(o.obj.DeepCopy()); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, mode := range []string{"decoded", "schema"} {
			b.Run(o.name+"/"+mode, func(b *testing.B) {
				s := &bt
				if mode == "decoded" {
					s = nil
				}
				b.ReportAllocs()
				for b.Loop() {
					if u, err := sv.typed.prune(o.obj.DeepCopy().Object, func() *builtinTypes { return s }); err != nil || len(u) > 0 {
						b.Fatal(err, u)
					}
				}
			})
		}
	}
}
