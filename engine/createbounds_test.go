package engine

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// The attack: thousands of items outside a large enum. Before the bound,
// 20,000 such items against a 120,000-value enum took the server to 24 GB;
// without an enum the cost grew with the square of the items. Now a create
// answers 422 with a bounded Status, in time and memory linear in the
// object.
func TestCreateManyInvalidItemsIsBounded(t *testing.T) {
	s := newService(t)
	serveEnumBoxes(t, s, 1000)
	for _, n := range []int{20000, 80000} {
		obj := kindstest.Box(fmt.Sprintf("b%d", n), n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := s.Create(context.Background(), kindstest.Boxes, obj, metav1.CreateOptions{})
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%d invalid items, 1000-value enum: %v, %.1f MiB allocated", n, took, float64(alloc)/(1<<20))
		if !apierrors.IsInvalid(err) {
			t.Fatalf("create: %v, want Invalid", err)
		}
		st := err.(apierrors.APIStatus).Status()
		if got := len(st.Details.Causes); got > kinds.MaxValidationErrors+2 {
			t.Errorf("%d causes, want at most %d", got, kinds.MaxValidationErrors+2)
		}
		if len(st.Message) > kinds.MaxInvalidMessageBytes+64 {
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

// A strict create of an object with thousands of unknown fields lists the
// first kinds.MaxValidationErrors and counts the rest.
func TestStrictUnknownFieldsBounded(t *testing.T) {
	s := newService(t)
	serveEnumBoxes(t, s, 3)
	obj := kindstest.Box("strict", 0)
	spec := obj.Object["spec"].(map[string]any)
	for i := range 5000 {
		spec[fmt.Sprintf("unknown%d", i)] = "x"
	}
	_, err := s.Create(context.Background(), kindstest.Boxes, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if !apierrors.IsBadRequest(err) {
		t.Fatalf("create: %v, want BadRequest", err)
	}
	msg := err.Error()
	if n := strings.Count(msg, "unknown field "); n != kinds.MaxValidationErrors {
		t.Errorf("%d unknown fields listed, want %d", n, kinds.MaxValidationErrors)
	}
	if !strings.HasSuffix(msg, ", and 4900 more unknown fields") || !strings.Contains(msg, "strict decoding error: unknown field") {
		t.Errorf("message %.200s ... %s", msg, msg[max(0, len(msg)-80):])
	}
}

// A list of many empty objects against an item schema of many properties
// costs what the object costs: the validator and defaulting walked every
// property of the schema for every item (300,000 items of 1000 properties:
// almost 4 minutes).
func TestManyItemsAgainstManyProperties(t *testing.T) {
	s := newService(t)
	props := make([]string, 1000)
	for i := range props {
		props[i] = fmt.Sprintf("p%d: {type: string}", i)
	}
	if _, ok := serveBoxes(t, s, ` {type: object, properties: {spec: {type: object, properties: {items: {type: array, items: {type: object, properties: {`+strings.Join(props, ", ")+`, d: {type: string, default: x}}}}}}}}`); !ok {
		t.Fatal("boxes not served")
	}
	items := make([]any, 100000)
	for i := range items {
		items[i] = map[string]any{"p1": "a"}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Box",
		"metadata": map[string]any{"name": "p", "namespace": "default"}, "spec": map[string]any{"items": items}}}
	start := time.Now()
	out, err := s.Create(context.Background(), kindstest.Boxes, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	took := time.Since(start)
	t.Logf("100,000 items of one field against 1001 properties: %v", took)
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := unstructured.NestedString(out.Object["spec"].(map[string]any)["items"].([]any)[99999].(map[string]any), "d"); d != "x" {
		t.Errorf("item not defaulted: %v", out.Object["spec"].(map[string]any)["items"].([]any)[99999])
	}
	if took > 15*time.Second {
		t.Errorf("took %v", took)
	}
}
