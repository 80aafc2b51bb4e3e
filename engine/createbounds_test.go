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
// almost 4 minutes). The same list is created against an item schema of one
// property and against one of 1000, in turn on the same machine, and the
// second must cost about what the first does (walking the schema made it 30
// times the first at these sizes): a ratio, so that a loaded machine, which
// slows both, does not fail it.
func TestManyItemsAgainstManyProperties(t *testing.T) {
	const items = 5000
	list := make([]any, items)
	for i := range list {
		list[i] = map[string]any{"p0": "a"}
	}
	// serve returns a Service of boxes whose items have props properties
	// and d, with a default.
	serve := func(props int) *Service {
		s := newService(t)
		names := make([]string, props)
		for i := range names {
			names[i] = fmt.Sprintf("p%d: {type: string}", i)
		}
		if _, ok := serveBoxes(t, s, ` {type: object, properties: {spec: {type: object, properties: {items: {type: array, items: {type: object, properties: {`+strings.Join(names, ", ")+`, d: {type: string, default: x}}}}}}}}`); !ok {
			t.Fatal("boxes not served")
		}
		return s
	}
	create := func(s *Service) time.Duration {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Box",
			"metadata": map[string]any{"name": "p", "namespace": "default"}, "spec": map[string]any{"items": list}}}
		start := time.Now()
		out, err := s.Create(context.Background(), kindstest.Boxes, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if d, _, _ := unstructured.NestedString(out.Object["spec"].(map[string]any)["items"].([]any)[items-1].(map[string]any), "d"); d != "x" {
			t.Errorf("item not defaulted: %v", out.Object["spec"].(map[string]any)["items"].([]any)[items-1])
		}
		return took
	}
	one, wide := serve(1), serve(1000)
	// The fastest of two runs each, taken in turn, so that a moment of load
	// weighs on neither alone.
	few, many := time.Duration(1<<62), time.Duration(1<<62)
	for range 2 {
		few = min(few, create(one))
		many = min(many, create(wide))
	}
	t.Logf("%d items of one field against 2 properties: %v; against 1001: %v", items, few, many)
	if many > 4*few {
		t.Errorf("%d items against 1001 properties took %v, %.1f times as long as against 2 (%v): the cost follows the schema, not the object",
			items, many, float64(many)/float64(few), few)
	}
}
