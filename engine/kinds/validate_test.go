package kinds

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// describe renders errors for comparison.
func describe(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = fmt.Sprintf("%s|%s|%s|%v", e.Type, e.Field, e.Detail, e.BadValue)
	}
	return out
}

// sameValidation fails unless the kind's createValidation and its
// strategy's Validate give the same errors for obj, compared with opts.
func sameValidation(t *testing.T, sv *Kind, obj *unstructured.Unstructured, opts ...cmp.Option) field.ErrorList {
	t.Helper()
	if sv.createValidation == nil {
		t.Fatalf("%s has no createValidation", sv.GVR)
	}
	ctx := context.Background()
	want := sv.strategy.Validate(ctx, obj.DeepCopy())
	got := sv.createValidation.validate(ctx, obj.DeepCopy())
	if diff := cmp.Diff(describe(want), describe(got), opts...); diff != "" {
		t.Errorf("createValidation differs from the strategy (-strategy +createValidation):\n%s", diff)
	}
	return got
}

// serveBoxes serves the Box kind with openAPIV3Schema in r and returns
// what r serves for boxes.
func serveBoxes(t testing.TB, r *Registry, openAPIV3Schema string) (*Kind, bool) {
	t.Helper()
	serveCRD(t, r, testsupport.CRD{Kind: "Box", Plural: "boxes", Schema: openAPIV3Schema}.Unstructured())
	return r.Get(kindstest.Boxes)
}

func TestCreateValidationMatchesStrategy(t *testing.T) {
	r := newRegistry(t)
	sv, _ := r.Get(widgets)
	base := func() *unstructured.Unstructured {
		u := kindstest.Widget("w", "small", map[string]string{"app": "x"})
		u.SetUID("u")
		u.SetCreationTimestamp(metav1.Now())
		u.SetGeneration(1)
		return u
	}
	for _, tc := range []struct {
		name    string
		change  func(u *unstructured.Unstructured)
		invalid bool
	}{
		{"valid", func(*unstructured.Unstructured) {}, false},
		{"valid with finalizers and annotations", func(u *unstructured.Unstructured) {
			u.SetFinalizers([]string{"example.setpoint.dev/x"})
			u.SetAnnotations(map[string]string{"a": "b"})
		}, false},
		{"bad name", func(u *unstructured.Unstructured) { u.SetName("Not_A_Name") }, true},
		{"generateName only", func(u *unstructured.Unstructured) { u.SetName(""); u.SetGenerateName("w-") }, true},
		{"bad label", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a b": "c"}) }, true},
		{"annotations too large", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"a": strings.Repeat("x", 300*1024)})
		}, true},
		{"bad finalizer", func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"a/b/c"}) }, true},
		{"negative generation", func(u *unstructured.Unstructured) { u.SetGeneration(-1) }, true},
		{"no namespace", func(u *unstructured.Unstructured) { u.SetNamespace("") }, true},
		{"owner reference without uid", func(u *unstructured.Unstructured) {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "K", Name: "n"}})
		}, true},
		{"metadata not an object", func(u *unstructured.Unstructured) { u.Object["metadata"] = "x" }, true},
		{"no metadata", func(u *unstructured.Unstructured) { delete(u.Object, "metadata") }, true},
		{"label not a string", func(u *unstructured.Unstructured) {
			u.Object["metadata"].(map[string]any)["labels"] = map[string]any{"a": int64(1)}
		}, true},
		{"wrong kind", func(u *unstructured.Unstructured) { u.SetKind("Gadget") }, true},
		{"wrong apiVersion", func(u *unstructured.Unstructured) { u.SetAPIVersion("example.setpoint.dev/v9") }, true},
		{"wrong kind, list map duplicate and CEL rule broken", func(u *unstructured.Unstructured) {
			u.SetKind("Gadget")
			c := map[string]any{"type": "Ready", "status": "True"}
			_ = unstructured.SetNestedSlice(u.Object, []any{c, runtime.DeepCopyJSONValue(c)}, "status", "conditions")
			_ = unstructured.SetNestedField(u.Object, strings.Repeat("n", 64), "spec", "name")
		}, true},
		{"size not in the enum", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "huge", "spec", "size")
		}, true},
		{"required field missing (CEL not run)", func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "size")
		}, true},
		{"CEL rule broken", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, strings.Repeat("n", 64), "spec", "name")
		}, true},
		{"conditions list map duplicate", func(u *unstructured.Unstructured) {
			c := map[string]any{"type": "Ready", "status": "True"}
			_ = unstructured.SetNestedSlice(u.Object, []any{c, runtime.DeepCopyJSONValue(c)}, "status", "conditions")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := base()
			tc.change(u)
			if errs := sameValidation(t, sv, u); (len(errs) > 0) != tc.invalid {
				t.Errorf("errors %v, want invalid %v", errs, tc.invalid)
			}
		})
	}
}

func TestCreateValidationEmbeddedAndListTypes(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	sv, ok := serveBoxes(t, r, `
        type: object
        properties:
          spec:
            type: object
            properties:
              tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
              inner:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true`)
	if !ok {
		t.Fatal("boxes not served")
	}
	if !sv.createValidation.embedded || !sv.createValidation.listTypes {
		t.Fatalf("embedded %v, listTypes %v; want both", sv.createValidation.embedded, sv.createValidation.listTypes)
	}
	if wsv, _ := r.Get(widgets); wsv.createValidation.embedded || !wsv.createValidation.listTypes {
		t.Errorf("Widget: embedded %v, listTypes %v; want false, true", wsv.createValidation.embedded, wsv.createValidation.listTypes)
	}
	if wsv, _ := r.Get(widgets); !wsv.noEmbedded || sv.noEmbedded {
		t.Errorf("noEmbedded: Widget %v, Box %v; want true, false", wsv.noEmbedded, sv.noEmbedded)
	}
	// Embedded resources are still coerced: an unknown field in their
	// metadata is found.
	box := kindstest.FromYAML(t, `{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"c","namespace":"default"},"spec":{"inner":{"apiVersion":"v1","kind":"K","metadata":{"name":"i","bogus":1}}}}`)
	unknown, err := sv.Coerce(box)
	if err == nil {
		err = sv.StrictFields(ctx, metav1.FieldValidationStrict, unknown)
	}
	if err == nil || !strings.Contains(err.Error(), "spec.inner.metadata.bogus") {
		t.Errorf("strict create with an unknown field in an embedded resource's metadata: %v", err)
	}
	var boxes []*unstructured.Unstructured
	for _, doc := range []string{
		`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"b","namespace":"default"},"spec":{"tags":["a","b"],"inner":{"apiVersion":"v1","kind":"K","metadata":{"name":"i"}}}}`,
		`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"b","namespace":"default"},"spec":{"tags":["a","a"]}}`,
		`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"b","namespace":"default"},"spec":{"inner":{"metadata":{"name":"Bad_Name"}}}}`,
	} {
		var m map[string]any
		if err := utiljson.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		sameValidation(t, sv, u)
		u.SetResourceVersion("3")
		boxes = append(boxes, u)
	}
	// Updates between them: embedded resources and list sets as the
	// strategies check them on update.
	for _, old := range boxes {
		for _, obj := range boxes {
			sameUpdateValidation(t, sv, "", obj, old)
			sameUpdateValidation(t, sv, "status", obj, old)
		}
	}
}

// FuzzTypedMeta checks that typedMeta, when it accepts metadata, gives what
// the unstructured converter gives.
func FuzzTypedMeta(f *testing.F) {
	for _, s := range typedMetaSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) { checkTypedMeta(t, doc) })
}

// typedMetaSeeds are the seed corpus of FuzzTypedMeta.
var typedMetaSeeds = []string{
	`{"name":"a","namespace":"default","labels":{"a":"b"},"annotations":{},"finalizers":[]}`,
	`{"creationTimestamp":"2026-11-21T07:00:00.5-03:30","generation":2,"uid":"u","deletionGracePeriodSeconds":0,"deletionTimestamp":"2026-01-01T00:00:00Z"}`,
	`{"name":"c","ownerReferences":[{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","name":"w","uid":"u","controller":true,"blockOwnerDeletion":false}]}`,
	`{"ownerReferences":[{"name":"n","controller":null},{},"x"]}`,
	`{"ownerReferences":[]}`,
}

// checkTypedMeta fails when typedMeta accepts metadata (given as JSON) and
// gives other than the unstructured converter. It reports whether
// typedMeta accepted it.
func checkTypedMeta(t *testing.T, doc string) bool {
	t.Helper()
	var md map[string]any
	if err := utiljson.Unmarshal([]byte(doc), &md); err != nil || md == nil {
		return false
	}
	got, ok := typedMeta(md)
	if !ok {
		return false
	}
	want := &metav1.ObjectMeta{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, want); err != nil {
		t.Fatalf("typedMeta accepted %s, which the converter refuses: %v", doc, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("typedMeta(%s) (-converter +typedMeta):\n%s", doc, diff)
	}
	return true
}

// sameUpdateValidation fails unless the kind's update validation (of the
// status subresource when sub is "status") and its strategy's
// ValidateUpdate give the same errors for obj over old, compared with opts.
func sameUpdateValidation(t *testing.T, sv *Kind, sub string, obj, old *unstructured.Unstructured, opts ...cmp.Option) field.ErrorList {
	t.Helper()
	if sv.createValidation == nil {
		t.Fatalf("%s has no createValidation", sv.GVR)
	}
	ctx := context.Background()
	st := sv.strategy
	got := sv.createValidation.validateUpdate(ctx, obj.DeepCopy(), old.DeepCopy())
	if sub == "status" {
		st = sv.statusStrategy
		got = sv.createValidation.validateStatusUpdate(ctx, obj.DeepCopy(), old.DeepCopy())
	}
	want := st.ValidateUpdate(ctx, obj.DeepCopy(), old.DeepCopy())
	if diff := cmp.Diff(describe(want), describe(got), opts...); diff != "" {
		t.Errorf("%s update validation differs from the strategy (-strategy +engine):\n%s", sub, diff)
	}
	return got
}

// TestUpdateValidationMatchesStrategy compares the engine's update and
// status update validation with the strategies' on every pair of Widget
// variants, as stored and as sent: valid and invalid updates, and invalid
// values kept from the stored object (which ratcheting lets through).
func TestUpdateValidationMatchesStrategy(t *testing.T) {
	r := newRegistry(t)
	sv, _ := r.Get(widgets)
	vs := kindstest.WidgetVariants()
	counts := map[string][2]int{}
	for oldName, old := range vs {
		for newName, obj := range vs {
			for _, sub := range []string{"", "status"} {
				name := fmt.Sprintf("%s/%s over %s", sub, newName, oldName)
				t.Run(name, func(t *testing.T) {
					errs := sameUpdateValidation(t, sv, sub, obj, old)
					c := counts[sub]
					c[min(len(errs), 1)]++
					counts[sub] = c
				})
			}
		}
	}
	// The pairs must include both outcomes in both modes, ratcheting among
	// them: an update that keeps an invalid stored value is valid.
	for _, sub := range []string{"", "status"} {
		if c := counts[sub]; c[0] == 0 || c[1] == 0 {
			t.Errorf("%q updates: %d valid, %d invalid; want both", sub, c[0], c[1])
		}
	}
	for _, sub := range []string{"", "status"} {
		for _, name := range []string{"bad date-time", "size not in the enum", "CEL rule broken"} {
			if errs := sameUpdateValidation(t, sv, sub, vs[name], vs[name]); len(errs) != 0 {
				t.Errorf("%q update keeping %s: %v, want it ratcheted", sub, name, errs)
			}
		}
	}
}
