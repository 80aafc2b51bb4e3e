package kindstest

import (
	"maps"
	"math/rand/v2"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Rand makes pseudo-random JSON values and Widgets for differential tests:
// from a fixed seed, a test sweeps the same inputs on every run.
type Rand struct {
	*rand.Rand
	// Keys are the member names of the objects Value makes and the
	// members Mutate adds.
	Keys []string
}

// NewRand returns a Rand of seed whose Keys are WidgetKeys.
func NewRand(seed uint64) Rand {
	return Rand{Rand: rand.New(rand.NewPCG(seed, seed)), Keys: WidgetKeys}
}

// WidgetKeys are the fields of metadata, of an owner reference, of
// Widget's spec and status and of a condition, some in another case, and
// unknown ones.
var WidgetKeys = []string{
	"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
	"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
	"annotations", "finalizers", "ownerReferences", "managedFields",
	"apiVersion", "kind", "controller", "blockOwnerDeletion",
	"size", "state", "capacity", "lastProvisioned", "conditions", "type", "status", "reason",
	"metadata", "spec", "Name", "UID", "bogus", "a", "app",
}

// words are the strings Value picks: valid and invalid values of the
// fields in WidgetKeys.
var words = []string{
	"", "a", "w", "v", "x/y", "small", "large", "huge", "Ready", "True", "False", "Maybe",
	"Provisioned", "2026-11-21T07:00:00Z", "2026-11-21T07:00:00.5-03:30", "0001-01-01T00:00:00Z",
	"yesterday", "example.setpoint.dev/v1", "example.setpoint.dev/f", "a/b/c", "Not_A_Name",
	"Widget", "v1", "\u00e9", "a b", "7", "u",
}

// Value returns a random JSON value as decoding into an Unstructured
// gives one (int64 or float64 numbers), nested at most depth deep.
func (r Rand) Value(depth int) any {
	n := 6
	if depth > 0 {
		n = 8
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return []int64{0, 1, -1, 2, 5, 11, 30}[r.IntN(7)]
	case 3:
		return []float64{1.5, -0.5}[r.IntN(2)]
	case 4, 5:
		return words[r.IntN(len(words))]
	case 6:
		l := make([]any, r.IntN(3))
		for i := range l {
			l[i] = r.Value(depth - 1)
		}
		return l
	default:
		m := map[string]any{}
		for range r.IntN(3) {
			m[r.Keys[r.IntN(len(r.Keys))]] = r.Value(depth - 1)
		}
		return m
	}
}

// Mutate makes n random changes in v, an object or array, and returns it:
// in an object or array reached by a random walk from v, a member or
// element set to a value of Value, deleted, or (in an array) copied.
func (r Rand) Mutate(v any, n int) any {
	for range n {
		r.mutateOnce(v)
	}
	return v
}

func (r Rand) mutateOnce(v any) {
	for {
		var children []any
		switch c := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(c)) {
				if isContainer(c[k]) {
					children = append(children, c[k])
				}
			}
		case []any:
			for _, e := range c {
				if isContainer(e) {
					children = append(children, e)
				}
			}
		}
		if len(children) == 0 || r.IntN(3) == 0 {
			break
		}
		v = children[r.IntN(len(children))]
	}
	switch c := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(c))
		if len(keys) > 0 && r.IntN(3) == 0 {
			delete(c, keys[r.IntN(len(keys))])
			return
		}
		k := r.Keys[r.IntN(len(r.Keys))]
		if len(keys) > 0 && r.IntN(2) == 0 {
			k = keys[r.IntN(len(keys))]
		}
		c[k] = r.Value(2)
	case []any:
		if len(c) == 0 {
			return
		}
		i := r.IntN(len(c))
		switch r.IntN(3) {
		case 0:
			c[i] = r.Value(2)
		case 1:
			c[i] = nil
		default:
			c[i] = runtime.DeepCopyJSONValue(c[r.IntN(len(c))])
		}
	}
}

func isContainer(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// Widget returns one of WidgetVariants with up to two random changes.
func (r Rand) Widget() *unstructured.Unstructured {
	vs := WidgetVariants()
	names := slices.Sorted(maps.Keys(vs))
	u := vs[names[r.IntN(len(names))]]
	r.Mutate(u.Object, r.IntN(3))
	return u
}
