package engine

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var boxes = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "boxes"}

// serveEnumBoxes serves boxes whose spec.items is a list of strings, each one
// of enum values, and whose spec.counts is a list of integers at most 10.
func serveEnumBoxes(t testing.TB, s *Service, enum int) *served {
	t.Helper()
	values := make([]string, enum)
	for i := range values {
		values[i] = fmt.Sprintf("value-%d", i)
	}
	sv, ok := serveBoxes(t, s, `
        type: object
        properties:
          spec:
            type: object
            properties:
              items: {type: array, items: {type: string, enum: [`+strings.Join(values, ", ")+`]}}
              counts: {type: array, items: {type: integer, maximum: 10}}`)
	if !ok {
		t.Fatal("boxes not served")
	}
	return sv
}

// box returns a Box whose spec.items holds n strings outside the enum.
func box(name string, n int) *unstructured.Unstructured {
	items := make([]any, n)
	for i := range items {
		items[i] = fmt.Sprintf("bad-%d", i)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Box",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"items": items},
	}}
}

// A few errors are the library's, in its order; a validation that reaches
// the limit keeps the first MaxValidationErrors and says it stopped.
func TestBoundedValidationKeepsLibraryErrors(t *testing.T) {
	s := newService(t)
	sv := serveEnumBoxes(t, s, 3)
	props, _, err := versionSchema(crdOf(t, s, "boxes.example.setpoint.dev"), "v1")
	if err != nil {
		t.Fatal(err)
	}
	lib, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 5, MaxValidationErrors - 1, MaxValidationErrors, MaxValidationErrors + 1, 500} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			obj := box("b", n)
			obj.Object["spec"].(map[string]any)["counts"] = []any{int64(11), int64(12)}
			want := apiservervalidation.ValidateCustomResource(nil, obj.Object, lib)
			b := sv.createValidation.validator.withContext(context.Background())
			got := apiservervalidation.ValidateCustomResource(nil, obj.Object, b)
			if len(want) <= MaxValidationErrors {
				if b.stopped {
					t.Errorf("stopped with %d errors", len(want))
				}
				// The library walks properties in map order: compare sets.
				if diff := cmp.Diff(describe(want), describe(got), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
					t.Errorf("bounded validation differs from the library's (-library +bounded):\n%s", diff)
				}
				return
			}
			if !b.stopped {
				t.Fatalf("%d errors: not stopped", len(want))
			}
			if len(got) != MaxValidationErrors+1 {
				t.Fatalf("%d errors, want %d and the note", len(got), MaxValidationErrors)
			}
			all := map[string]bool{}
			for _, d := range describe(want) {
				all[d] = true
			}
			for _, d := range describe(got[:MaxValidationErrors]) {
				if !all[d] {
					t.Errorf("error %q is not the library's", d)
				}
			}
			if last := got[len(got)-1]; !strings.Contains(last.Detail, "too many errors") {
				t.Errorf("last error %q, want the too-many note", last.Error())
			}
		})
	}
}

// crdOf decodes the stored CRD name.
func crdOf(t testing.TB, s *Service, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	u, err := s.Get(context.Background(), CRDResource, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdFromMap(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// The attack: thousands of items outside a large enum. Before the bound,
// 20,000 such items against a 120,000-value enum took the server to 24 GB;
// without an enum the cost grew with the square of the items. Now a create
// answers 422 with a bounded Status, in time and memory linear in the
// object.
func TestCreateManyInvalidItemsIsBounded(t *testing.T) {
	s := newService(t)
	serveEnumBoxes(t, s, 1000)
	for _, n := range []int{20000, 80000} {
		obj := box(fmt.Sprintf("b%d", n), n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := s.Create(context.Background(), boxes, obj, metav1.CreateOptions{})
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%d invalid items, 1000-value enum: %v, %.1f MiB allocated", n, took, float64(alloc)/(1<<20))
		if !apierrors.IsInvalid(err) {
			t.Fatalf("create: %v, want Invalid", err)
		}
		st := err.(apierrors.APIStatus).Status()
		if got := len(st.Details.Causes); got > MaxValidationErrors+2 {
			t.Errorf("%d causes, want at most %d", got, MaxValidationErrors+2)
		}
		if len(st.Message) > maxInvalidMessageBytes+64 {
			t.Errorf("message of %d bytes", len(st.Message))
		}
		if last := st.Details.Causes[len(st.Details.Causes)-1]; !strings.Contains(last.Message, "too many errors") {
			t.Errorf("last cause %q does not say validation stopped", last.Message)
		}
		// Each of the first errors lists 1000 values (about 14 KB): the
		// whole request stays within a small multiple of the object and
		// 100 such messages.
		if alloc > 400<<20 {
			t.Errorf("%d MiB allocated", alloc>>20)
		}
		if took > 20*time.Second {
			t.Errorf("took %v", took)
		}
	}
}

// A validation stops when its request's context ends.
func TestBoundedValidationStopsWithContext(t *testing.T) {
	s := newService(t)
	sv := serveEnumBoxes(t, s, 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	obj := box("b", 2000)
	obj.Object["spec"].(map[string]any)["items"] = make([]any, 2000) // nulls: not counted as errors by the limit alone
	for i := range 2000 {
		obj.Object["spec"].(map[string]any)["items"].([]any)[i] = "value-1"
	}
	obj.Object["spec"].(map[string]any)["items"].([]any)[1999] = "bad"
	errs := sv.createValidation.validate(ctx, obj)
	found := false
	for _, e := range errs {
		if strings.Contains(e.Detail, "validation stopped: context canceled") {
			found = true
		}
		if e.Field == "spec.items[1999]" {
			t.Errorf("validated past the end of the request: %v", e)
		}
	}
	if !found {
		t.Errorf("errors %v, want the note that validation stopped", errs)
	}
}

func TestNewInvalidBounds(t *testing.T) {
	gk := schema.GroupKind{Group: "example.setpoint.dev", Kind: "Box"}
	t.Run("short list as NewInvalid", func(t *testing.T) {
		errs := field.ErrorList{
			field.Invalid(field.NewPath("spec", "a"), "x", "bad"),
			field.Required(field.NewPath("spec", "b"), ""),
			field.Invalid(field.NewPath("spec", "a"), "x", "bad"),
		}
		if diff := cmp.Diff(apierrors.NewInvalid(gk, "b", errs).ErrStatus, newInvalid(gk, "b", errs).ErrStatus); diff != "" {
			t.Errorf("(-NewInvalid +newInvalid):\n%s", diff)
		}
		one := errs[:1]
		if diff := cmp.Diff(apierrors.NewInvalid(gk, "b", one).ErrStatus, newInvalid(gk, "b", one).ErrStatus); diff != "" {
			t.Errorf("(-NewInvalid +newInvalid):\n%s", diff)
		}
	})
	t.Run("long list", func(t *testing.T) {
		var errs field.ErrorList
		for i := range 5000 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "items").Index(i), strings.Repeat("v", 10000), "bad"))
		}
		st := newInvalid(gk, "b", errs).ErrStatus
		if len(st.Details.Causes) != MaxValidationErrors+1 {
			t.Errorf("%d causes", len(st.Details.Causes))
		}
		if last := st.Details.Causes[MaxValidationErrors].Message; last != "too many errors: 4900 more not shown" {
			t.Errorf("last cause %q", last)
		}
		total := 0
		for _, c := range st.Details.Causes {
			if len(c.Message) > maxCauseBytes+40 {
				t.Fatalf("cause of %d bytes", len(c.Message))
			}
			total += len(c.Message)
		}
		if total > maxCausesBytes+MaxValidationErrors*(minCauseBytes+40) {
			t.Errorf("causes of %d bytes", total)
		}
		if len(st.Message) > maxInvalidMessageBytes+40 || !strings.Contains(st.Message, "[truncated") {
			t.Errorf("message of %d bytes: %.200s", len(st.Message), st.Message)
		}
	})
}

// Junctors are validated by the engine (schemajunctors.go) with bounded
// branches: the same errors as the library's, linear in failing items, and
// a long failing alternative does not hide a valid one.
func TestBoundedJunctors(t *testing.T) {
	s := newService(t)
	sv, ok := serveBoxes(t, s, `
        type: object
        properties:
          spec:
            type: object
            properties:
              items: {type: array, items: {type: string}}
              mode: {type: string}
              count: {type: integer}
              port: {x-kubernetes-int-or-string: true}
              ports: {type: array, items: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}}
            anyOf:
            - properties: {items: {items: {enum: [a, b]}}}
            - properties: {items: {items: {enum: [c]}}}
            oneOf:
            - required: [mode]
            - required: [count]
            allOf:
            - properties: {count: {maximum: 5}}
            - properties: {mode: {anyOf: [{minLength: 2}, {maxLength: 0}]}}
            not: {properties: {mode: {enum: [forbidden]}}, required: [mode]}`)
	if !ok {
		t.Fatal("boxes not served")
	}
	props, _, err := versionSchema(crdOf(t, s, "boxes.example.setpoint.dev"), "v1")
	if err != nil {
		t.Fatal(err)
	}
	lib, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatal(err)
	}
	items := func(v string, n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	for _, tc := range []struct {
		name string
		spec map[string]any
	}{
		{"valid", map[string]any{"items": []any{"a", "b"}, "mode": "xy"}},
		{"second anyOf", map[string]any{"items": []any{"c", "c"}, "count": int64(1)}},
		{"no anyOf", map[string]any{"items": []any{"a", "x", "c"}, "mode": "xy"}},
		{"two oneOf", map[string]any{"mode": "xy", "count": int64(1)}},
		{"no oneOf", map[string]any{"items": []any{"a"}}},
		{"allOf", map[string]any{"count": int64(7)}},
		{"nested anyOf", map[string]any{"mode": "x"}},
		{"not", map[string]any{"mode": "forbidden"}},
		{"everything", map[string]any{"items": []any{"x", 3}, "mode": "forbidden", "count": "7"}},
		{"int-or-string", map[string]any{"mode": "xy", "port": true, "ports": []any{int64(0), "A", int64(3), "http", false}}},
		{"long failing alternative", map[string]any{"items": items("c", 3*MaxValidationErrors), "count": int64(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Box", "spec": tc.spec}
			want := apiservervalidation.ValidateCustomResource(nil, obj, lib)
			if valid := strings.HasPrefix(tc.name, "valid") || tc.name == "second anyOf" || strings.HasPrefix(tc.name, "long"); valid != (len(want) == 0) {
				t.Fatalf("the library gives %v", want)
			}
			b := sv.createValidation.validator.withContext(context.Background())
			got := apiservervalidation.ValidateCustomResource(nil, obj, b)
			if diff := cmp.Diff(describe(want), describe(got), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("bounded validation differs from the library's (-library +bounded):\n%s", diff)
			}
			if b.stopped {
				t.Errorf("stopped")
			}
		})
	}
	t.Run("many failing items", func(t *testing.T) {
		obj := map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Box", "spec": map[string]any{"items": items("x", 50000), "count": int64(1)}}
		start := time.Now()
		b := sv.createValidation.validator.withContext(context.Background())
		got := apiservervalidation.ValidateCustomResource(nil, obj, b)
		t.Logf("50000 items failing both anyOf alternatives: %v, %d errors", time.Since(start), len(got))
		if !b.stopped || len(got) > 2*MaxValidationErrors+3 {
			t.Errorf("stopped %v, %d errors", b.stopped, len(got))
		}
	})
}

// A strict create of an object with thousands of unknown fields lists the
// first MaxValidationErrors and counts the rest.
func TestStrictUnknownFieldsBounded(t *testing.T) {
	s := newService(t)
	serveEnumBoxes(t, s, 3)
	obj := box("strict", 0)
	spec := obj.Object["spec"].(map[string]any)
	for i := range 5000 {
		spec[fmt.Sprintf("unknown%d", i)] = "x"
	}
	_, err := s.Create(context.Background(), boxes, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if !apierrors.IsBadRequest(err) {
		t.Fatalf("create: %v, want BadRequest", err)
	}
	msg := err.Error()
	if n := strings.Count(msg, "unknown field "); n != MaxValidationErrors {
		t.Errorf("%d unknown fields listed, want %d", n, MaxValidationErrors)
	}
	if !strings.HasSuffix(msg, ", and 4900 more unknown fields") || !strings.Contains(msg, "strict decoding error: unknown field") {
		t.Errorf("message %.200s ... %s", msg, msg[max(0, len(msg)-80):])
	}
}
