package kinds

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// libraryMeta is metadata coercion as the library does it: a strict JSON
// round trip into metav1.ObjectMeta and back.
func libraryMeta(obj map[string]any) (map[string]any, []string, error) {
	meta, found, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil || !found {
		return nil, unknown, err
	}
	if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
		return nil, nil, err
	}
	m, _ := obj["metadata"].(map[string]any)
	return m, unknown, nil
}

// checkCanonicalMeta fails when canonicalMeta accepts metadata (given as
// JSON) and gives other than the library's result. It reports whether
// canonicalMeta accepted it.
func checkCanonicalMeta(t *testing.T, doc string) bool {
	t.Helper()
	var md any
	if err := utiljson.Unmarshal([]byte(doc), &md); err != nil {
		return false
	}
	md = objjson.NormalizeNumbers(md)
	m, ok := md.(map[string]any)
	if !ok {
		return false
	}
	got, ok := canonicalMeta(m)
	if !ok {
		return false
	}
	var copied any
	_ = utiljson.Unmarshal([]byte(doc), &copied)
	want, unknown, err := libraryMeta(map[string]any{"metadata": objjson.NormalizeNumbers(copied)})
	if err != nil || len(unknown) > 0 {
		t.Fatalf("canonicalMeta accepted %s, which the library refuses: %v, unknown %v", doc, err, unknown)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("canonicalMeta(%s) (-library +canonicalMeta):\n%s", doc, diff)
	}
	return true
}

func TestCanonicalMetaMatchesLibrary(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		fast bool // whether canonicalMeta handles it (else the library does)
	}{
		{"name only", `{"name":"a","namespace":"default"}`, true},
		{"everything it knows", `{"name":"a","generateName":"a-","namespace":"n","selfLink":"/x","uid":"u","resourceVersion":"5",
			"generation":3,"creationTimestamp":"2026-11-21T06:00:00Z","deletionTimestamp":"2026-11-21T07:00:00Z",
			"deletionGracePeriodSeconds":0,"labels":{"a":"b"},"annotations":{"c":"d"},"finalizers":["x/y","z"]}`, true},
		{"empty values dropped", `{"name":"","generation":0,"labels":{},"annotations":{},"finalizers":[]}`, true},
		{"timestamp in another zone, with fractions", `{"creationTimestamp":"2026-11-21T07:00:00.123456+01:00"}`, true},
		{"zero timestamp", `{"creationTimestamp":"0001-01-01T00:00:00Z"}`, false},
		{"bad timestamp", `{"creationTimestamp":"yesterday"}`, false},
		{"null timestamp", `{"deletionTimestamp":null}`, false},
		{"unknown field", `{"name":"a","bogus":1}`, false},
		{"field in another case", `{"Name":"a"}`, false},
		{"label not a string", `{"labels":{"a":1}}`, false},
		{"labels not an object", `{"labels":"x"}`, false},
		{"null annotation", `{"annotations":{"a":null}}`, false},
		{"finalizer not a string", `{"finalizers":[1]}`, false},
		{"generation a fraction", `{"generation":1.5}`, false},
		{"name not a string", `{"name":["m"]}`, false},
		{"owner references", `{"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"n","uid":"u"}]}`, true},
		{"owner references with controller and blockOwnerDeletion", `{"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"n","uid":"u","controller":true,"blockOwnerDeletion":false},{"kind":"J","name":"m","uid":"v","controller":false}]}`, true},
		{"owner reference missing fields", `{"ownerReferences":[{"name":"n"},{}]}`, true},
		{"empty owner references", `{"name":"a","ownerReferences":[]}`, true},
		{"owner reference null field", `{"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"n","uid":"u","controller":null}]}`, false},
		{"owner reference unknown field", `{"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"n","uid":"u","bogus":1}]}`, false},
		{"owner reference field in another case", `{"ownerReferences":[{"APIVersion":"v1","kind":"K","name":"n","uid":"u"}]}`, false},
		{"owner reference controller a string", `{"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"n","uid":"u","controller":"true"}]}`, false},
		{"owner reference not an object", `{"ownerReferences":["x"]}`, false},
		{"owner references not an array", `{"ownerReferences":{}}`, false},
		{"null owner references", `{"ownerReferences":null}`, false},
		{"managed fields", `{"managedFields":[]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkCanonicalMeta(t, tc.doc); got != tc.fast {
				t.Errorf("canonicalMeta accepted %s: %v, want %v", tc.doc, got, tc.fast)
			}
		})
	}
}

// FuzzCanonicalMeta checks that whatever metadata canonicalMeta accepts, it
// canonicalizes exactly as the library's JSON round trip does.
func FuzzCanonicalMeta(f *testing.F) {
	for _, s := range canonicalMetaSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		checkCanonicalMeta(t, doc)
	})
}

// canonicalMetaSeeds are the seed corpus of FuzzCanonicalMeta and of the
// sweeps that mutate metadata.
var canonicalMetaSeeds = []string{
	`{"name":"a","namespace":"default","labels":{"a":"b"}}`,
	`{"creationTimestamp":"2026-11-21T07:00:00.5-03:30","finalizers":["a"],"generation":2}`,
	`{"deletionGracePeriodSeconds":30,"deletionTimestamp":"2026-01-01T00:00:00Z"}`,
	`{"annotations":{"k":"\u00e9"},"uid":""}`,
	`{"name":"c","ownerReferences":[{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","name":"w","uid":"u","controller":true,"blockOwnerDeletion":true}]}`,
	`{"ownerReferences":[{"name":"n","controller":false},{}]}`,
}

// TestCoerceBuiltinEmptyMetadataMaps: a built-in object's empty labels and
// annotations are dropped, as decoding into ObjectMeta drops them, so that
// removing the last label leaves no labels at all.
func TestCoerceBuiltinEmptyMetadataMaps(t *testing.T) {
	for _, gvr := range []schema.GroupVersionResource{ConfigMapResource, SecretResource, EventResource, NamespaceResource} {
		k := kindOf(t, gvr)
		obj := eventObject(t, `{"apiVersion": "v1", "kind": "`+k.Kind+`", "metadata": {"name": "x", "labels": {}, "annotations": {}}}`)
		if _, err := k.Coerce(obj); err != nil {
			t.Fatal(err)
		}
		if md := obj.Object["metadata"].(map[string]any); len(md) != 1 || md["name"] != "x" {
			t.Errorf("%s: metadata %v, want only the name", k.Kind, md)
		}
	}
}
