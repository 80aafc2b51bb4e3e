package engine

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// TestConfigMapGenerationAsKubernetes: every write of a ConfigMap (create,
// update, merge patch, server-side apply, dry runs) leaves
// metadata.generation as kube-apiserver does: absent unless the creator
// sent one, and never changed after. A ConfigMap stored with a generation
// (as servers that counted one wrote them) keeps it, as kube-apiserver
// keeps the generation of any object whose strategy does not count one.
func TestConfigMapGenerationAsKubernetes(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	cmr := kinds.ConfigMapResource
	gen := func(t *testing.T, what string, u *unstructured.Unstructured, want int64) {
		t.Helper()
		md, _ := u.Object["metadata"].(map[string]any)
		if g, has := md["generation"]; has != (want != 0) || u.GetGeneration() != want {
			t.Errorf("%s: generation %v (set %v), want %d", what, g, has, want)
		}
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "default"}, "data": map[string]any{"a": "1"}}}
	out, err := s.Create(ctx, cmr, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gen(t, "created", out, 0)

	_ = unstructured.SetNestedField(out.Object, "2", "data", "a")
	out.SetGeneration(7) // a client cannot set it on update
	if out, err = s.Update(ctx, cmr, out, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	gen(t, "updated", out, 0)
	dry, err := s.Patch(ctx, cmr, "default", "c", types.MergePatchType, []byte(`{"data":{"a":"3"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	gen(t, "patched, dry run", dry, 0)
	if out, err = s.Patch(ctx, cmr, "default", "c", types.MergePatchType, []byte(`{"data":{"a":"3"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	gen(t, "patched", out, 0)
	applied, _, err := s.Apply(ctx, cmr, "default", "c",
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"},"data":{"a":"4"}}`),
		metav1.PatchOptions{FieldManager: "m", Force: new(true)})
	if err != nil {
		t.Fatal(err)
	}
	gen(t, "applied", applied, 0)

	sent := cm.DeepCopy()
	sent.SetName("sent")
	sent.SetGeneration(5)
	if out, err = s.Create(ctx, cmr, sent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gen(t, "created with generation 5", out, 5)

	// A ConfigMap an older server stored at generation 3.
	sv, _ := s.reg.Get(cmr)
	k := key(sv, "default", "c")
	kv, err := s.store.Get(ctx, k, store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old, err := sv.Decode(kv)
	if err != nil {
		t.Fatal(err)
	}
	old.SetGeneration(3)
	b, err := sv.Encode(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Update(ctx, k, b, kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	if out, err = s.Patch(ctx, cmr, "default", "c", types.MergePatchType, []byte(`{"data":{"a":"5"},"metadata":{"generation":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	gen(t, "stored at 3, patched", out, 3)
	if got, err := s.Get(ctx, cmr, "default", "c", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else {
		gen(t, "stored at 3, read", got, 3)
	}
}
