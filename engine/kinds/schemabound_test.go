package kinds

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// serveEnumBoxes serves boxes of kindstest.EnumBoxSchema(enum) in r.
func serveEnumBoxes(t testing.TB, r *Registry, enum int) *Kind {
	t.Helper()
	sv, ok := serveBoxes(t, r, kindstest.EnumBoxSchema(enum))
	if !ok {
		t.Fatal("boxes not served")
	}
	return sv
}

// A few errors are the library's, in its order; a validation that reaches
// the limit keeps the first MaxValidationErrors and says it stopped.
func TestBoundedValidationKeepsLibraryErrors(t *testing.T) {
	r := NewRegistry()
	sv := serveEnumBoxes(t, r, 3)
	lib := libraryBoxValidator(t, r)
	for _, n := range []int{1, 5, MaxValidationErrors - 1, MaxValidationErrors, MaxValidationErrors + 1, 500} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			obj := kindstest.Box("b", n)
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

// libraryBoxValidator returns the library's schema validator of the
// boxes served in r.
func libraryBoxValidator(t testing.TB, r *Registry) apiservervalidation.SchemaValidator {
	t.Helper()
	props, _, err := versionSchema(crdOf(t, r, "boxes.example.setpoint.dev"), "v1")
	if err != nil {
		t.Fatal(err)
	}
	lib, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// crdOf returns the served CRD name.
func crdOf(t testing.TB, r *Registry, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	for _, crd := range r.CRDs() {
		if crd.Name == name {
			return crd
		}
	}
	t.Fatalf("CRD %s not served", name)
	return nil
}

// A validation stops when its request's context ends.
func TestBoundedValidationStopsWithContext(t *testing.T) {
	r := NewRegistry()
	sv := serveEnumBoxes(t, r, 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	obj := kindstest.Box("b", 2000)
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
		if len(st.Message) > MaxInvalidMessageBytes+40 || !strings.Contains(st.Message, "[truncated") {
			t.Errorf("message of %d bytes: %.200s", len(st.Message), st.Message)
		}
	})
}

// junctorBoxSchema is a Box schema with every junctor, nested ones and
// int-or-string fields.
const junctorBoxSchema = `
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
            not: {properties: {mode: {enum: [forbidden]}}, required: [mode]}`

// Junctors are validated by the engine (schemajunctors.go) with bounded
// branches: the same errors as the library's, linear in failing items, and
// a long failing alternative does not hide a valid one.
func TestBoundedJunctors(t *testing.T) {
	r := NewRegistry()
	sv, ok := serveBoxes(t, r, junctorBoxSchema)
	if !ok {
		t.Fatal("boxes not served")
	}
	lib := libraryBoxValidator(t, r)
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
		{"null under junctors", map[string]any{"mode": "xy", "port": nil, "ports": []any{int64(1), nil}}},
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
