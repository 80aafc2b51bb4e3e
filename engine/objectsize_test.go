package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// newServiceLimit is newService with objects bounded to limit bytes.
func newServiceLimit(t *testing.T, limit int) *Service {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatalf("open badger: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(context.Background(), Options{Store: db, MaxObjectBytes: limit})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := s.Create(context.Background(), kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create widget CRD: %v", err)
	}
	return s
}

// tooLarge fails unless err is kube-apiserver's answer to etcd's "request
// is too large".
func tooLarge(t *testing.T, what string, err error) {
	t.Helper()
	var st apierrors.APIStatus
	if err == nil || !asStatus(err, &st) || st.Status().Code != http.StatusInternalServerError || st.Status().Message != "etcdserver: request is too large" {
		t.Fatalf("%s: %v, want 500 etcdserver: request is too large", what, err)
	}
	if c := st.Status().Details.Causes; len(c) != 1 || !strings.Contains(c[0].Message, "more than the limit of") {
		t.Errorf("%s: causes %v", what, c)
	}
}

func asStatus(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*st = s
	return ok
}

// Every write path holds the stored object to the limit; deletion does not.
func TestObjectSizeLimit(t *testing.T) {
	const limit = 32 << 10
	ctx := context.Background()
	s := newServiceLimit(t, limit)
	big := strings.Repeat("x", limit)
	stored := func(name string) *unstructured.Unstructured {
		t.Helper()
		u, err := s.Get(ctx, widgets, "default", name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	small := mustCreate(t, s, widget("small", "small", nil))

	t.Run("create", func(t *testing.T) {
		w := widget("big", "small", map[string]string{})
		w.SetAnnotations(map[string]string{"big": big})
		_, err := s.Create(ctx, widgets, w, metav1.CreateOptions{})
		tooLarge(t, "create", err)
		if _, err := s.Get(ctx, widgets, "default", "big", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after a refused create: %v", err)
		}
	})
	t.Run("update", func(t *testing.T) {
		u := stored("small")
		u.SetAnnotations(map[string]string{"big": big})
		_, err := s.Update(ctx, widgets, u, metav1.UpdateOptions{})
		tooLarge(t, "update", err)
	})
	t.Run("merge patch", func(t *testing.T) {
		_, err := s.Patch(ctx, widgets, "default", "small", types.MergePatchType, []byte(`{"metadata":{"annotations":{"big":"`+big+`"}}}`), metav1.PatchOptions{})
		tooLarge(t, "merge patch", err)
	})
	t.Run("patch past twice the limit", func(t *testing.T) {
		_, err := s.Patch(ctx, widgets, "default", "small", types.MergePatchType, []byte(`{"metadata":{"annotations":{"big":"`+big+big+`"}}}`), metav1.PatchOptions{})
		tooLarge(t, "patch", err)
	})
	t.Run("apply", func(t *testing.T) {
		_, _, err := s.Apply(ctx, widgets, "default", "small", []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"small","namespace":"default","annotations":{"big":"`+big+`"}}}`),
			metav1.PatchOptions{FieldManager: "test", Force: ptrTo(true)})
		tooLarge(t, "apply", err)
	})
	t.Run("status", func(t *testing.T) {
		u := stored("small")
		u.Object["status"] = map[string]any{"state": big}
		_, err := s.UpdateStatus(ctx, widgets, u, metav1.UpdateOptions{})
		tooLarge(t, "status", err)
	})
	t.Run("mutation", func(t *testing.T) {
		s.setAdmitter(AdmitterFuncs{MutateFunc: func(_ context.Context, req *AdmissionRequest) error {
			return unstructured.SetNestedField(req.Object.Object, big, "metadata", "annotations", "big")
		}})
		defer s.setAdmitter(nil)
		_, err := s.Create(ctx, widgets, widget("mutated", "small", nil), metav1.CreateOptions{})
		tooLarge(t, "create through a growing mutation", err)
	})
	if got := stored("small"); got.GetResourceVersion() != small.GetResourceVersion() {
		t.Errorf("a refused write changed the object: resourceVersion %s, was %s", got.GetResourceVersion(), small.GetResourceVersion())
	}

	t.Run("managedFields dropped to fit", func(t *testing.T) {
		// An object a little under the limit: the update's managedFields
		// entry takes it over, so it is stored without managedFields, as
		// kube-apiserver retries.
		// Applied, so that updates are tracked in managedFields.
		if _, _, err := s.Apply(ctx, widgets, "default", "edge", []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"edge","namespace":"default"},"spec":{"name":"edge","size":"small"}}`),
			metav1.PatchOptions{FieldManager: "applier"}); err != nil {
			t.Fatal(err)
		}
		kv, err := s.store.Get(ctx, key(mustServed(t, s), "default", "edge"), store.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const manager = "a-rather-long-field-manager-name"
		u := stored("edge")
		fill := limit - len(kv.Value) - 400
		u.SetAnnotations(map[string]string{"fill": strings.Repeat("y", fill)})
		if _, err := s.Update(ctx, widgets, u, metav1.UpdateOptions{FieldManager: manager}); err != nil {
			t.Fatalf("fill: %v", err)
		}
		kv, err = s.store.Get(ctx, key(mustServed(t, s), "default", "edge"), store.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u = stored("edge")
		mf, _ := json.Marshal(u.GetManagedFields())
		if len(mf) < 100 {
			t.Fatalf("managedFields %s", mf)
		}
		// Grow the annotation past the limit by less than the managedFields.
		u.SetAnnotations(map[string]string{"fill": strings.Repeat("y", fill+limit-len(kv.Value)+10)})
		out, err := s.Update(ctx, widgets, u, metav1.UpdateOptions{FieldManager: manager})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		if mf := out.GetManagedFields(); len(mf) != 0 {
			b, _ := json.Marshal(mf)
			t.Errorf("managedFields kept: %s", b)
		}
	})

	t.Run("deletion of an object at the limit", func(t *testing.T) {
		w := widget("full", "small", nil)
		w.SetFinalizers([]string{"example.setpoint.dev/hold"})
		mustCreate(t, s, w)
		kv, err := s.store.Get(ctx, key(mustServed(t, s), "default", "full"), store.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u := stored("full")
		u.SetAnnotations(map[string]string{"fill": strings.Repeat("z", limit-len(kv.Value)-30)})
		if _, err := s.Update(ctx, widgets, u, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("fill: %v", err)
		}
		if err := s.Delete(ctx, widgets, "default", "full", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if got := stored("full"); got.GetDeletionTimestamp() == nil {
			t.Errorf("no deletionTimestamp")
		}
		u = stored("full")
		u.SetFinalizers(nil)
		if _, err := s.Update(ctx, widgets, u, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("remove finalizer: %v", err)
		}
		if _, err := s.Get(ctx, widgets, "default", "full", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after its finalizer went: %v", err)
		}
	})
}

func mustServed(t *testing.T, s *Service) *kinds.Kind {
	t.Helper()
	sv, ok := s.reg.Get(widgets)
	if !ok {
		t.Fatal("widgets not served")
	}
	return sv
}

func TestDefaultObjectSizeLimit(t *testing.T) {
	s := newService(t)
	if got := s.MaxObjectBytes(); got != 1572864 {
		t.Errorf("default limit %d, want etcd's 1.5 MiB", got)
	}
	if _, ok := serveBoxes(t, s, ` {type: object, properties: {spec: {type: object, properties: {data: {type: string}}}}}`); !ok {
		t.Fatal("boxes not served")
	}
	box := func(name string, n int) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.setpoint.dev/v1", "kind": "Box",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"spec":     map[string]any{"data": strings.Repeat("x", n)},
		}}
	}
	if _, err := s.Create(context.Background(), kindstest.Boxes, box("fits", 1500<<10), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create of 1.46 MiB: %v", err)
	}
	_, err := s.Create(context.Background(), kindstest.Boxes, box("big", 1572864), metav1.CreateOptions{})
	tooLarge(t, fmt.Sprintf("create of %d bytes", 1572864), err)
}

func ptrTo[T any](v T) *T { return &v }
