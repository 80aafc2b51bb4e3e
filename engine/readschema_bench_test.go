package engine

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// BenchmarkListJSONReadSchemas lists 3,000 Doodads as JSON when they read as
// stored (written since their CRD's schemas last changed: the stored bytes
// are spliced) and when they predate the schemas (each is decoded, pruned,
// defaulted and encoded): what a schema change costs a list of the objects
// written before it, until they are written again.
func BenchmarkListJSONReadSchemas(b *testing.B) {
	ctx := context.Background()
	s, _ := openService(b, b.TempDir())
	if _, err := s.Create(ctx, kinds.CRDResource, doodadCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := range 3000 {
		o := kindstest.FromYAML(b, fmt.Sprintf("apiVersion: test.setpoint.dev/v1\nkind: Doodad\nmetadata: {name: d%04d}\nspec: {name: n%d, legacy: x}\n", i, i))
		if _, err := s.Create(ctx, doodads, o, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	list := func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for range b.N {
			l, err := s.ListJSON(ctx, doodads, "", metav1.ListOptions{})
			if err != nil || len(l.Items) != 3000 {
				b.Fatalf("list: %d items, %v", len(l.Items), err)
			}
		}
	}
	b.Run("as stored", list)
	sv, _ := s.reg.Get(doodads)
	cur, _ := s.store.CurrentRevision(ctx)
	sv.ReadSchemas().Raise(cur + 1) // as a schema change would: every object predates it
	b.Run("through the schemas", list)
}
