package kinds

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// The sweeps below check each hand-written version of library code against
// the library on inputs made from a fixed seed: the seed corpora of the
// fuzz targets and table tests, each with random changes. Every run sees
// the same inputs; `go test -fuzz` explores further. Each sweep also
// counts both outcomes, so that it cannot pass by taking one path only.

// sweep is the number of inputs of a sweep.
const sweep = 2000

// mutatedDocs returns n JSON documents, each a random one of seeds with up
// to three random changes.
func mutatedDocs(t *testing.T, r kindstest.Rand, seeds []string, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		var v any
		if err := json.Unmarshal([]byte(seeds[r.IntN(len(seeds))]), &v); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(r.Mutate(v, r.IntN(4)))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// bothOutcomes fails unless a sweep saw each of two outcomes at least
// once in ten.
func bothOutcomes(t *testing.T, what string, yes, no int) {
	t.Helper()
	if n := yes + no; yes < n/10 || no < n/10 {
		t.Errorf("%s in %d of %d inputs; want both outcomes, each in at least a tenth", what, yes, n)
	}
}

// canonicalMeta against schemaobjectmeta's round trip, as FuzzCanonicalMeta.
func TestCanonicalMetaSweep(t *testing.T) {
	accepted := 0
	docs := mutatedDocs(t, kindstest.NewRand(1), canonicalMetaSeeds, sweep)
	for _, doc := range docs {
		if checkCanonicalMeta(t, doc) {
			accepted++
		}
	}
	bothOutcomes(t, "canonicalMeta accepted", accepted, len(docs)-accepted)
}

// typedMeta against the unstructured converter, as FuzzTypedMeta.
func TestTypedMetaSweep(t *testing.T) {
	accepted := 0
	docs := mutatedDocs(t, kindstest.NewRand(2), append(typedMetaSeeds, canonicalMetaSeeds...), sweep)
	for _, doc := range docs {
		if checkTypedMeta(t, doc) {
			accepted++
		}
	}
	bothOutcomes(t, "typedMeta accepted", accepted, len(docs)-accepted)
}

// anyOrder compares lists of errors as sets: the library's schema
// validation walks properties in map order.
var anyOrder = cmpopts.SortSlices(func(a, b string) bool { return a < b })

// metadataOnce compares described errors as sets, an error of metadata by
// its type and field alone: the converter's message names the first member
// of the wrong type it meets, in map order.
var metadataOnce = cmp.Options{anyOrder, cmp.Transformer("metadataOnce", func(s string) string {
	if strings.HasPrefix(s, "Invalid value|metadata|") {
		return "Invalid value|metadata|"
	}
	return s
})}

// Create validation against the strategy's Validate, and update and status
// update validation against its ValidateUpdate, on Widget variants with
// random changes.
func TestValidationSweep(t *testing.T) {
	r := newRegistry(t)
	sv, _ := r.Get(widgets)
	rnd := kindstest.NewRand(3)
	valid, updates := [2]int{}, map[string][2]int{}
	for range sweep / 4 {
		old, obj := rnd.Widget(), rnd.Widget()
		valid[min(len(sameValidation(t, sv, obj, metadataOnce)), 1)]++
		for _, sub := range []string{"", "status"} {
			c := updates[sub]
			c[min(len(sameUpdateValidation(t, sv, sub, obj, old, metadataOnce)), 1)]++
			updates[sub] = c
		}
		if t.Failed() {
			t.Fatalf("on %v over %v", obj.Object, old.Object)
		}
	}
	bothOutcomes(t, "create valid", valid[0], valid[1])
	for sub, c := range updates {
		bothOutcomes(t, sub+" update valid", c[0], c[1])
	}
}

// The bounded validator, junctors included, against the library's schema
// validator, on Boxes of junctorBoxSchema with random specs.
func TestBoundedValidationSweep(t *testing.T) {
	r := NewRegistry()
	sv, ok := serveBoxes(t, r, junctorBoxSchema)
	if !ok {
		t.Fatal("boxes not served")
	}
	lib := libraryBoxValidator(t, r)
	rnd := kindstest.NewRand(4)
	rnd.Keys = []string{"items", "mode", "count", "port", "ports", "bogus"}
	// Each member or element takes a value valid for it three times in
	// four, else any of words.
	words := []any{"a", "b", "c", "x", "xy", "", "forbidden", int64(1), int64(7), true, nil}
	fits := map[string][]any{
		"items": {"a", "b"}, "mode": {"xy", "ab"}, "count": {int64(1), int64(5)},
		"port": {int64(1), "a"}, "ports": {int64(1), "http"}, "bogus": {"x"},
	}
	value := func(k string) any {
		if rnd.IntN(4) == 0 {
			return words[rnd.IntN(len(words))]
		}
		return fits[k][rnd.IntN(len(fits[k]))]
	}
	valid := [2]int{}
	for range sweep {
		spec := map[string]any{}
		for _, k := range rnd.Keys {
			switch n := rnd.IntN(4); {
			case n == 0:
			case k == "items" || k == "ports":
				l := make([]any, rnd.IntN(4))
				for i := range l {
					l[i] = value(k)
				}
				spec[k] = l
			default:
				spec[k] = value(k)
			}
		}
		if rnd.IntN(4) == 0 {
			rnd.Mutate(spec, 1)
		}
		obj := map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Box", "spec": spec}
		want := apiservervalidation.ValidateCustomResource(nil, obj, lib)
		b := sv.createValidation.validator.withContext(context.Background())
		got := apiservervalidation.ValidateCustomResource(nil, obj, b)
		if diff := cmp.Diff(describe(want), describe(got), anyOrder); diff != "" {
			t.Fatalf("spec %v: bounded validation differs from the library's (-library +bounded):\n%s", spec, diff)
		}
		valid[min(len(want), 1)]++
	}
	bothOutcomes(t, "valid", valid[0], valid[1])
}

// Defaulting with the skeleton against defaulting with the whole schema,
// on Boxes of defaultingBoxSchema with random changes to
// defaultingBoxSpecs.
func TestDefaultingSchemaSweep(t *testing.T) {
	r := NewRegistry()
	sv, ok := serveBoxes(t, r, defaultingBoxSchema)
	if !ok {
		t.Fatal("boxes not served")
	}
	skeleton := defaultingSchema(sv.structural)
	rnd := kindstest.NewRand(5)
	rnd.Keys = []string{"plain", "mode", "nested", "a", "b", "deep", "c", "d", "none", "x", "y", "list", "n", "m", "strings", "labels", "v", "counts", "nonNull", "z"}
	changed := [2]int{}
	for _, spec := range mutatedDocs(t, rnd, defaultingBoxSpecs, sweep) {
		var obj map[string]any
		if err := json.Unmarshal([]byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","spec":`+spec+`}`), &obj); err != nil {
			t.Fatal(err)
		}
		obj = runtime.DeepCopyJSON(obj)
		want, got := runtime.DeepCopyJSON(obj), runtime.DeepCopyJSON(obj)
		structuraldefaulting.Default(want, sv.structural)
		structuraldefaulting.Default(got, skeleton)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("spec %s (-schema +skeleton):\n%s", spec, diff)
		}
		if cmp.Equal(obj, got) {
			changed[0]++
		} else {
			changed[1]++
		}
	}
	if changed[1] < sweep/10 {
		t.Errorf("defaults set in %d of %d inputs; want at least a tenth", changed[1], sweep)
	}
}
