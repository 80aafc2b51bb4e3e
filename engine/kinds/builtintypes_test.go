package kinds

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestPrunedLiveBuiltin: the live object of a built-in kind loses the
// fields its API type does not declare, at any depth (in lists, below map
// elements), and is the same object when it has none.
func TestPrunedLiveBuiltin(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gvr       schema.GroupVersionResource
		in, want  string
		unchanged bool
	}{{
		name: "declared only", gvr: ConfigMapResource, unchanged: true,
		in: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"y"}},"data":{"k":"v"}}`,
	}, {
		name: "declared only, times", gvr: EventResource, unchanged: true,
		in: `{"apiVersion":"v1","kind":"Event","metadata":{"name":"a"},"involvedObject":{"kind":"Pod"},
			"firstTimestamp":"2026-01-02T03:04:05Z","series":{"lastObservedTime":"2026-01-02T03:04:05.000000Z"}}`,
	}, {
		name: "declared only, a CRD's items and caBundle", gvr: CRDResource, unchanged: true,
		in: `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"a"},
			"spec":{"conversion":{"strategy":"Webhook","webhook":{"clientConfig":{"caBundle":"!!"}}},
			"versions":[{"name":"v1","schema":{"openAPIV3Schema":{"type":"object","properties":{"l":{"type":"array","items":{"type":"string"}}}}}}]}}`,
	}, {
		name: "struct field", gvr: NamespaceResource,
		in:   `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"},"spec":{"bogus":1,"finalizers":["kubernetes"]}}`,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"},"spec":{"finalizers":["kubernetes"]}}`,
	}, {
		name: "in a list", gvr: NamespaceResource,
		in: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"},
			"status":{"conditions":[{"type":"A","status":"True","bogus":{"x":1}},{"type":"B","status":"False"}]}}`,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"},
			"status":{"conditions":[{"type":"A","status":"True"},{"type":"B","status":"False"}]}}`,
	}, {
		name: "top level and metadata", gvr: EventResource,
		in: `{"apiVersion":"v1","kind":"Event","metadata":{"name":"a","bogus":"1"},"bogus":2,
			"involvedObject":{"kind":"Pod","bogus":"3"},"source":{"component":"c"}}`,
		want: `{"apiVersion":"v1","kind":"Event","metadata":{"name":"a"},"involvedObject":{"kind":"Pod"},"source":{"component":"c"}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			k := kindOf(t, tc.gvr)
			var in unstructured.Unstructured
			if err := json.Unmarshal([]byte(tc.in), &in.Object); err != nil {
				t.Fatal(err)
			}
			before := in.DeepCopy()
			out := k.PrunedLive(&in)
			if tc.unchanged {
				if out != &in {
					t.Fatal("a live object with no undeclared field was copied")
				}
				return
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, out.Object); diff != "" {
				t.Fatalf("pruned (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before.Object, in.Object); diff != "" {
				t.Fatalf("the live object was changed:\n%s", diff)
			}
		})
	}
}
