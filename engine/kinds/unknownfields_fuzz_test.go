package kinds

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// walkSeeds are well-formed objects of each built-in kind whose Go type
// finds unknown fields (Kind.typed), with most of their typed fields set:
// nested structs, lists of structs, maps, times, quantities-like strings,
// a CRD's schema with items, additionalProperties and defaults.
var walkSeeds = map[string][]string{
	"/v1/namespaces": {
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"},"spec":{"finalizers":["kubernetes"]},
			"status":{"phase":"Active","conditions":[{"type":"T","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"r","message":"m"}]}}`,
	},
	"/v1/namespaces#plain": {
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"},"spec":{"finalizers":["kubernetes","x/y"]},
			"status":{"phase":"Terminating","conditions":[{"type":"T","status":"False","reason":"r"},{"type":"U","status":"True"}]}}`,
	},
	"/v1/events": {
		`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e","namespace":"default"},
			"involvedObject":{"kind":"Pod","namespace":"default","name":"p","uid":"u","apiVersion":"v1","resourceVersion":"1","fieldPath":"spec"},
			"reason":"R","message":"m","source":{"component":"c","host":"h"},"firstTimestamp":"2026-01-02T03:04:05Z",
			"lastTimestamp":null,"count":3,"type":"Normal","eventTime":"2026-01-02T03:04:05.000001Z",
			"series":{"count":2,"lastObservedTime":"2026-01-02T03:04:05.000000Z"},"action":"a",
			"related":{"kind":"Node","name":"n"},"reportingComponent":"rc","reportingInstance":"ri"}`,
	},
	"events.k8s.io/v1/events": {
		`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e","namespace":"default"},
			"eventTime":"2026-01-02T03:04:05.000001Z","series":{"count":2,"lastObservedTime":"2026-01-02T03:04:05.000000Z"},
			"reportingController":"c","reportingInstance":"i","action":"a","reason":"R",
			"regarding":{"kind":"Pod","name":"p","namespace":"default"},"related":{"kind":"Node","name":"n"},
			"note":"n","type":"Warning","deprecatedSource":{"component":"c"},"deprecatedFirstTimestamp":"2026-01-02T03:04:05Z",
			"deprecatedLastTimestamp":"2026-01-02T03:04:05Z","deprecatedCount":4}`,
	},
	"apiextensions.k8s.io/v1/customresourcedefinitions": {
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"boxes.example.setpoint.dev"},
			"spec":{"group":"example.setpoint.dev","scope":"Namespaced","preserveUnknownFields":false,
			"names":{"plural":"boxes","singular":"box","kind":"Box","listKind":"BoxList","shortNames":["bx"],"categories":["all"]},
			"conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],
				"clientConfig":{"caBundle":"eA==","service":{"namespace":"n","name":"s","path":"/c","port":443}}}},
			"versions":[{"name":"v1","served":true,"storage":true,"deprecated":false,
				"additionalPrinterColumns":[{"name":"Size","type":"integer","jsonPath":".spec.size","priority":0}],
				"subresources":{"status":{},"scale":{"specReplicasPath":".spec.r","statusReplicasPath":".status.r"}},
				"selectableFields":[{"jsonPath":".spec.size"}],
				"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":false,
					"properties":{"spec":{"type":"object","required":["size"],"properties":{
						"size":{"type":"integer","minimum":1,"maximum":10,"default":3},
						"tags":{"type":"array","maxItems":4,"items":{"type":"string","enum":["a","b"]},"x-kubernetes-list-type":"set"},
						"labels":{"type":"object","additionalProperties":{"type":"string"}},
						"ports":{"type":"array","items":{"type":"object","properties":{"port":{"type":"integer"}}},
							"x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["port"]},
						"any":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]},
						"free":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"example":{"a":1}}},
						"x-kubernetes-validations":[{"rule":"self.size < 10","message":"small"}]}}}}}]},
			"status":{"acceptedNames":{"plural":"boxes","kind":"Box"},"storedVersions":["v1"],
				"conditions":[{"type":"Established","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z"}]}}`,
	},
	"apiextensions.k8s.io/v1/customresourcedefinitions#plain": {
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"boxes.example.setpoint.dev"},
			"spec":{"group":"example.setpoint.dev","scope":"Cluster",
			"names":{"plural":"boxes","singular":"box","kind":"Box","listKind":"BoxList"},
			"conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],
				"clientConfig":{"caBundle":"eA==","url":"https://x","service":{"namespace":"n","name":"s","port":443}}}},
			"versions":[{"name":"v1","served":true,"storage":true,
				"additionalPrinterColumns":[{"name":"Size","type":"integer","jsonPath":".spec.size","priority":1}],
				"subresources":{"status":{}},
				"schema":{"openAPIV3Schema":{"type":"object","maxProperties":4,"minProperties":0,
					"properties":{"spec":{"type":"object","required":["size"],"nullable":true,"properties":{
						"size":{"type":"integer","minimum":1,"maximum":10,"multipleOf":1,"format":"int32"},
						"name":{"type":"string","maxLength":8,"minLength":1,"pattern":"^a","x-kubernetes-embedded-resource":false}}}}}}}]}}`,
	},
	"apiextensions.k8s.io/v1/customresourcedefinitions#base64": {
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"boxes.example.setpoint.dev"},
			"spec":{"group":"example.setpoint.dev","scope":"Cluster","names":{"plural":"boxes","kind":"Box"},
			"conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],"clientConfig":{"caBundle":"e A=="}}},
			"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`,
	},
	"/v1/serviceaccounts": {
		`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"s","namespace":"default"},
			"secrets":[{"name":"t","kind":"Secret","namespace":"default"}],"imagePullSecrets":[{"name":"p"}],
			"automountServiceAccountToken":false}`,
	},
	"/v1/secrets": {
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"default"},"type":"Opaque",
			"data":{"k":"eA==","l":""},"stringData":{"p":"q"},"immutable":true}`,
	},
	"/v1/configmaps": {
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"},
			"data":{"a.b":"1","rules":"x"},"binaryData":{"k":"eA=="},"immutable":false}`,
	},
	"rbac.authorization.k8s.io/v1/roles": {
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r","namespace":"default"},
			"rules":[{"verbs":["get","list"],"apiGroups":[""],"resources":["pods"],"resourceNames":["a"]}]}`,
	},
	"rbac.authorization.k8s.io/v1/clusterroles": {
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"c"},
			"rules":[{"verbs":["get"],"nonResourceURLs":["/x"]},{"verbs":["*"],"apiGroups":["*"],"resources":["*"]}],
			"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"a":"b"},
				"matchExpressions":[{"key":"k","operator":"In","values":["v"]}]}]}}`,
	},
	"rbac.authorization.k8s.io/v1/rolebindings": {
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"b","namespace":"default"},
			"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"},
			"subjects":[{"kind":"User","name":"u","apiGroup":"rbac.authorization.k8s.io"},{"kind":"ServiceAccount","name":"s","namespace":"default"}]}`,
	},
	"rbac.authorization.k8s.io/v1/clusterrolebindings": {
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"b"},
			"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"r"},
			"subjects":[{"kind":"Group","name":"g","apiGroup":"rbac.authorization.k8s.io"}]}`,
	},
}

// walkMutations is the number of mutated variants of each of walkSeeds
// that plain `go test` runs.
const walkMutations = 150

// walkKinds are the built-in kinds with a Go type, by their resource as
// walkSeeds names them, with the member names of that type at any depth
// (the keys mutations add or change).
var walkKinds = func() map[string]walkKind {
	out := map[string]walkKind{}
	for _, k := range builtins() {
		if k.typed == nil {
			continue
		}
		names := map[string]bool{}
		jsonNames(k.typed.typ, names, map[reflect.Type]bool{})
		keys := slices.Sorted(maps.Keys(names))
		// Unknown ones, and known ones in another case.
		keys = append(keys, "bogus", "Name", "Kind", "x")
		out[k.GVR.Group+"/"+k.GVR.Version+"/"+k.GVR.Resource] = walkKind{k, keys}
	}
	return out
}()

type walkKind struct {
	kind *Kind
	keys []string
}

// jsonNames adds to names the JSON member names of the structs t holds,
// at any depth.
func jsonNames(t reflect.Type, names map[string]bool, seen map[reflect.Type]bool) {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		jsonNames(t.Elem(), names, seen)
	case reflect.Struct:
		if seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				names[name] = true
			}
			jsonNames(f.Type, names, seen)
		}
	}
}

// walkOutcomes counts, by resource, the inputs the walk decided alone
// ([0]) and those it left to the decoder ([1]).
var walkOutcomes sync.Map

func countWalk(res string, decided bool) {
	c, _ := walkOutcomes.LoadOrStore(res, new([2]atomic.Int64))
	if decided {
		c.(*[2]atomic.Int64)[0].Add(1)
	} else {
		c.(*[2]atomic.Int64)[1].Add(1)
	}
}

// FuzzBuiltinWalkMatchesDecode checks prune, which decodes a built-in
// kind's object only when the walk of its structured-merge-diff schema
// finds in it an unknown field or a value the decoder may refuse, against
// pruneDecoded, which always decodes (the exact answer): both must give
// the same error (status code and message), the same unknown-field paths
// and the same object. Its inputs are a kind's resource, an object of it
// and a seed of random changes to the object: members added or set (known
// and unknown names, at any depth, in lists too) to values of every JSON
// type, integers made fractions, integral floats or out of int32's range.
// Plain `go test` runs walkMutations of each of walkSeeds.
func FuzzBuiltinWalkMatchesDecode(f *testing.F) {
	for _, res := range slices.Sorted(maps.Keys(walkKinds)) {
		if len(walkSeeds[res]) == 0 {
			f.Fatalf("no seed object for the built-in kind %s", res)
		}
	}
	for _, res := range slices.Sorted(maps.Keys(walkSeeds)) {
		for _, doc := range walkSeeds[res] {
			res, _, _ := strings.Cut(res, "#")
			for i := range walkMutations {
				f.Add(res, doc, uint64(i), uint8(i%4))
			}
		}
	}
	if fl := flag.Lookup("test.fuzz"); fl == nil || fl.Value.String() == "" {
		f.Cleanup(func() {
			// Each kind's inputs take both paths, but an Event's: its
			// objects hold times, which decode themselves, and are always
			// decoded.
			for res := range walkKinds {
				c, ok := walkOutcomes.Load(res)
				if !ok || strings.HasSuffix(res, "/events") {
					continue
				}
				yes, no := c.(*[2]atomic.Int64)[0].Load(), c.(*[2]atomic.Int64)[1].Load()
				if yes < (yes+no)/10 || no < (yes+no)/10 {
					f.Errorf("%s: the walk decided %d of %d inputs alone; want both outcomes, each in at least a tenth", res, yes, yes+no)
				}
			}
		})
	}
	f.Fuzz(func(t *testing.T, res, doc string, seed uint64, changes uint8) {
		wk, ok := walkKinds[res]
		if !ok {
			return
		}
		var obj map[string]any
		if err := utiljson.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
			return
		}
		r := kindstest.NewRand(seed)
		r.Keys = wk.keys
		r.Mutate(obj, int(changes%4))
		if r.IntN(2) == 0 {
			renumber(r, obj)
		}
		tf := wk.kind.typed
		walked, decoded := runtime.DeepCopyJSON(obj), runtime.DeepCopyJSON(obj)
		schema := tf.schemaOf(wk.kind)
		if !tf.encode && tf.plainFields(walked) && (!tf.holdsTyped(walked) || schema != nil && !schema.hasUnknown(walked, tf.noFields)) {
			countWalk(res, true)
		} else {
			countWalk(res, false)
		}
		gotPaths, gotErr := tf.prune(walked, func() *builtinTypes { return schema })
		wantPaths, wantErr := tf.pruneDecoded(decoded, true)
		if got, want := decodeStatus(wk.kind, gotErr), decodeStatus(wk.kind, wantErr); got != want {
			t.Fatalf("%s %v: error (walk) %s, (decode) %s", res, obj, got, want)
		}
		if diff := cmp.Diff(wantPaths, gotPaths); diff != "" {
			t.Fatalf("%s %v: unknown paths (-decode +walk):\n%s", res, obj, diff)
		}
		if diff := cmp.Diff(decoded, walked); diff != "" {
			t.Fatalf("%s %v: object (-decode +walk):\n%s", res, obj, diff)
		}
	})
}

// decodeStatus returns the status code and message kube-apiserver answers
// err, a decoding error of an object of k, with; "" for none.
func decodeStatus(k *Kind, err error) string {
	if err == nil {
		return ""
	}
	var s apierrors.APIStatus
	if !errors.As(k.DecodeError(err), &s) {
		return "not a status: " + err.Error()
	}
	return fmt.Sprintf("%d %s", s.Status().Code, s.Status().Message)
}

// renumber changes some of the numbers and strings in v at random, in
// place: an integer into a fraction, an integral float (which the decoder
// refuses in an integer field), or one beyond int32's or float64's
// integers; a string into one of several kinds of base64, well formed or
// not.
func renumber(r kindstest.Rand, v any) {
	change := func(n any) any {
		if s, ok := n.(string); ok && r.IntN(16) == 0 {
			// Base64 the decoder takes or refuses, in a []byte field.
			return []string{s + "=", "e A==", "eA==\n", "!!!!", "eA", "", "eAo="}[r.IntN(7)]
		}
		if _, ok := n.(int64); !ok || r.IntN(4) != 0 {
			return n
		}
		i := n.(int64)
		switch r.IntN(4) {
		case 0:
			return float64(i) + 0.5
		case 1:
			return float64(i)
		case 2:
			return i + 1<<32
		default:
			return -i - 1<<53
		}
	}
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			v[k] = change(v[k])
			renumber(r, v[k])
		}
	case []any:
		for i := range v {
			v[i] = change(v[i])
			renumber(r, v[i])
		}
	}
}
