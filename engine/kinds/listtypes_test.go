package kinds

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// listBoxSchema has list sets and maps at the top of spec, in the items of
// a list, under additional properties, and a plain list beside them.
const listBoxSchema = `
        type: object
        properties:
          spec:
            type: object
            properties:
              tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
              plain: {type: array, items: {type: string}}
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    ports: {type: array, x-kubernetes-list-type: set, items: {type: integer}}
              groups:
                type: object
                additionalProperties:
                  type: array
                  x-kubernetes-list-type: set
                  items: {type: string}`

var listBoxSeeds = []string{
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"b"},"spec":{}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"b"},"spec":{"plain":["a","a"]}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"b"},"spec":{"tags":["a","b"],"parts":[{"name":"x","ports":[1,2]},{"name":"y"}]}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"b"},"spec":{"tags":["a"],"parts":[],"groups":{"g":["a"],"h":[]}}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"b"},"spec":{"groups":{"g":["a","a"]}}}`,
}

// TestListNodeSweep checks that listErrors gives what the library's check
// gives on mutated boxes: never skipping an object the library finds an
// error in, and skipping the walk for many of the others.
func TestListNodeSweep(t *testing.T) {
	r := newRegistry(t)
	sv, ok := serveBoxes(t, r, listBoxSchema)
	if !ok {
		t.Fatal("boxes not served")
	}
	cv := sv.createValidation
	if cv.lists == nil {
		t.Fatal("Box has no listNode")
	}
	if wsv, _ := r.Get(widgets); wsv.createValidation.lists == nil {
		t.Error("Widget (status.conditions is a list map) has no listNode")
	}
	skipped, failed := 0, 0
	for _, doc := range mutatedDocs(t, kindstest.NewRand(7), listBoxSeeds, sweep) {
		var obj map[string]any
		if err := json.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		want := structurallisttype.ValidateListSetsAndMaps(nil, cv.structural, obj)
		if !cv.lists.mayFail(obj) {
			skipped++
			if len(want) > 0 {
				t.Errorf("%s: skipped, the library reports %v", doc, want)
			}
		}
		if len(want) > 0 {
			failed++
		}
		got := cv.listErrors(obj)
		if diff := cmp.Diff(describe(want), describe(got), anyOrder); diff != "" {
			t.Errorf("%s: listErrors differ from the library (-library +listErrors):\n%s", doc, diff)
		}
	}
	bothOutcomes(t, "walk skipped", skipped, sweep-skipped)
	if failed == 0 {
		t.Error("no input broke a list set or map")
	}
}
