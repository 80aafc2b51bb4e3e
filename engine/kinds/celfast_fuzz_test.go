package kinds

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// celGen builds a random structural schema with x-kubernetes-validations
// rules and random objects for it, from a byte string (a fuzz input): each
// choice reads one byte, and a used-up string always chooses the first
// option, so every input gives a finite schema.
type celGen struct {
	data []byte
	i    int
	// long tells that the object being made has a long list already: one
	// long list per object keeps nested ones from multiplying.
	long bool
}

func (g *celGen) n(k int) int {
	if k <= 1 || g.i >= len(g.data) {
		return 0
	}
	b := g.data[g.i]
	g.i++
	return int(b) % k
}

func (g *celGen) chance(pct int) bool { return g.n(100) >= 100-pct }

func pick[T any](g *celGen, from ...T) T { return from[g.n(len(from))] }

// celPropNames are the property names: plain ones, CEL reserved words and
// names that CEL reads escaped (dashes, dots, underscores), and one that
// cannot be escaped at all.
var celPropNames = []string{"a", "b", "c", "in", "namespace", "x-y", "x.y", "__u__", "int", "1num"}

// celStrings are the string values: empty, short, long, and strings that
// parse as quantities, IPs, CIDRs, URLs, dates, times and durations.
var celStrings = []string{"", "a", "b", "abc", "1", "10Mi", "1.2.3.4", "10.0.0.0/8", "::1", "https://x.y/z?q", "2020-01-01T00:00:00Z",
	"2020-01-01", "1s", "90m", "z", "aaaaaaaaaaaaaaaa", "-1", "ab-c", strings.Repeat("a", 300)}

// node generates the schema of one node and the rules on it; depth bounds
// the nesting.
func (g *celGen) node(depth int) *apiextensionsv1.JSONSchemaProps {
	kind := g.n(11)
	if depth <= 0 {
		kind = g.n(5)
	}
	s := &apiextensionsv1.JSONSchemaProps{}
	switch kind {
	case 0:
		s.Type = "string"
		switch g.n(6) {
		case 1:
			s.Format = "date-time"
		case 2:
			s.Format = "duration"
		case 3:
			s.Format = "date"
		case 4:
			s.Format = "byte"
		}
		if g.chance(30) {
			s.MaxLength = ptrTo(int64(pick(g, 3, 40, 4000)))
		}
	case 1:
		s.Type = "integer"
	case 2:
		s.Type = "number"
	case 3:
		s.Type = "boolean"
	case 4:
		s.XIntOrString = true
	case 5, 6: // an object with properties
		s.Type = "object"
		s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		for range 1 + g.n(3) {
			s.Properties[pick(g, celPropNames...)] = *g.node(depth - 1)
		}
		if g.chance(20) {
			s.XPreserveUnknownFields = ptrTo(true)
		}
	case 7: // a map
		s.Type = "object"
		s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: g.node(depth - 1)}
		if g.chance(20) {
			s.XMapType = ptrTo(pick(g, "granular", "atomic"))
		}
	case 8, 9: // a list, a list of lists
		s.Type = "array"
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: g.node(depth - 1)}
		switch g.n(4) {
		case 1:
			s.XListType = ptrTo("atomic")
		case 2:
			if t := s.Items.Schema.Type; t == "string" || t == "integer" || t == "boolean" {
				s.XListType = ptrTo("set")
			}
		case 3:
			if it := s.Items.Schema; it.Type == "object" && len(it.Properties) > 0 {
				s.XListType = ptrTo("map")
				for k := range it.Properties {
					if t := it.Properties[k].Type; t == "string" || t == "integer" {
						s.XListMapKeys = append(s.XListMapKeys, k)
						it.Required = append(it.Required, k)
					}
				}
				if len(s.XListMapKeys) == 0 {
					s.XListType = nil
				}
			}
		}
		if g.chance(30) {
			s.MaxItems = ptrTo(int64(pick(g, 2, 20, 500)))
		}
	case 10: // an embedded resource, or fields kept as they come
		s.Type = "object"
		s.XPreserveUnknownFields = ptrTo(true)
		if g.chance(60) {
			s.XEmbeddedResource = true
		}
	}
	if g.chance(20) {
		s.Nullable = true
	}
	for range g.n(3) {
		if r, ok := g.rule(s, "self", 2); ok {
			s.XValidations = append(s.XValidations, g.ruleOf(s, r))
		}
	}
	return s
}

// ruleOf wraps an expression in a rule, with a message, a
// messageExpression, a field path and a reason at random, or a transition
// rule instead.
func (g *celGen) ruleOf(s *apiextensionsv1.JSONSchemaProps, r string) apiextensionsv1.ValidationRule {
	v := apiextensionsv1.ValidationRule{Rule: r}
	switch g.n(20) {
	case 1:
		v.Rule = "self == oldSelf"
	case 2:
		v.Rule = "!oldSelf.hasValue() || oldSelf.value() == self"
		v.OptionalOldSelf = ptrTo(true)
	case 3:
		v.Rule = r + " || self == oldSelf"
	}
	switch g.n(4) {
	case 1:
		v.Message = "broken"
	case 2:
		v.MessageExpression = pick(g, "'broken'", "string(self)", "'x'.repeat(10)")
	case 3:
		v.Reason = ptrTo(pick(g, apiextensionsv1.FieldValueForbidden, apiextensionsv1.FieldValueRequired, apiextensionsv1.FieldValueDuplicate))
	}
	for k := range s.Properties {
		if g.chance(30) {
			if e, ok := apiservercel.Escape(k); ok && e == k {
				v.FieldPath = "." + k
			} else {
				v.FieldPath = "['" + k + "']"
			}
		}
		break
	}
	return v
}

// rule returns an expression about the value e of schema s: true on some
// values, false, an error or a large cost on others.
func (g *celGen) rule(s *apiextensionsv1.JSONSchemaProps, e string, depth int) (string, bool) {
	sub := func(tmpl string) string { return strings.ReplaceAll(tmpl, "$e", e) }
	switch {
	case s.XIntOrString:
		return sub(pick(g, "type($e) == string ? $e.size() < 3 : $e < 3", "$e == 1", "$e == 'a'", "type($e) == int")), true
	case s.XEmbeddedResource:
		return sub(pick(g, "$e.kind != 'X'", "$e.metadata.name.startsWith('a')", "has($e.metadata.name)", "$e.apiVersion == 'v1'", "has($e.spec)")), true
	}
	switch s.Type {
	case "string":
		switch s.Format {
		case "date-time", "date":
			return sub(pick(g, "$e < timestamp('2030-01-01T00:00:00Z')", "$e.getFullYear() == 2020")), true
		case "duration":
			return sub(pick(g, "$e > duration('1s')", "$e.getMinutes() < 60")), true
		case "byte":
			return sub(pick(g, "size($e) < 3", "$e == b'a'")), true
		}
		return sub(pick(g, "$e.size() < 4", "$e.startsWith('a')", "$e.matches('^[a-z]*$')", "$e == 'b'", "$e.lowerAscii() == $e",
			"isURL($e) && url($e).getHost() != ''", "isIP($e) && ip($e).family() == 4", "isCIDR($e) && cidr($e).prefixLength() > 4",
			"isQuantity($e) && quantity($e).isGreaterThan(quantity('1'))", "$e.find('[0-9]+') == ''",
			"!format.dns1123Label().validate($e).hasValue()", "$e.split('a').size() < 3", "$e.indexOf('b') < 1",
			"$e.replace('a', 'bb').size() < 8", "$e.find('z+') == '' && $e.findAll('a').size() < 100",
			"int($e) > 0", "duration($e) > duration('1s')", "timestamp($e) > timestamp('2000-01-01T00:00:00Z')")), true
	case "integer":
		return sub(pick(g, "$e >= 0", "$e % 2 == 0", "$e < 10", "$e * 1000000000000 > 0", "100 / $e > 1", "double($e) < 1.5")), true
	case "number":
		return sub(pick(g, "$e >= 0.0", "$e < 1.5", "$e == 1.0", "int($e) < 3", "$e == 1")), true
	case "boolean":
		return sub(pick(g, "$e", "!$e", "$e == true")), true
	case "array":
		if depth <= 0 {
			return sub("$e.size() < 3"), true
		}
		x := fmt.Sprintf("x%d", depth)
		elem, ok := g.rule(s.Items.Schema, x, depth-1)
		if !ok {
			elem = "true"
		}
		return sub(pick(g, "$e.size() < 3", "$e.all("+x+", "+elem+")", "$e.exists("+x+", "+elem+")", "$e.exists_one("+x+", true)",
			"$e.all(p, $e.all(q, true))", "$e.map(p, $e.map(q, p)).size() >= 0", "$e == $e",
			"($e + $e).size() == $e.size()", "size($e.filter("+x+", "+elem+")) <= 1", "$e.isSorted()", "$e.sum() >= 0",
			"$e.indexOf($e[0]) == 0")), true
	case "object":
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			if depth <= 0 {
				return sub("size($e) < 3"), true
			}
			k := fmt.Sprintf("k%d", depth)
			elem, ok := g.rule(s.AdditionalProperties.Schema, e+"["+k+"]", depth-1)
			if !ok {
				elem = "true"
			}
			return sub(pick(g, "$e.all("+k+", "+k+".size() < 3)", "$e.all("+k+", "+elem+")", "size($e) < 3", "'a' in $e",
				"$e.exists("+k+", "+k+" == 'a')", "$e == $e")), true
		}
		var names []string
		for k := range s.Properties {
			if esc, ok := apiservercel.Escape(k); ok {
				names = append(names, esc)
			}
		}
		if len(names) == 0 || depth <= 0 {
			return sub(pick(g, "$e == $e", "size($e) < 3", "has($e.a)", "$e.a == 1")), true
		}
		c := names[g.n(len(names))]
		var child string
		for k, p := range s.Properties {
			if esc, _ := apiservercel.Escape(k); esc == c {
				child, _ = g.rule(&p, e+"."+c, depth-1)
			}
		}
		if child == "" {
			child = "true"
		}
		return sub(pick(g, "has($e."+c+")", "!has($e."+c+") || "+child, "$e == $e", "has($e."+c+") == has($e."+names[0]+")",
			child)), true
	}
	return "", false
}

// rootRules are the rules at the resource root.
var rootRules = []string{"self.metadata.name.startsWith('b')", "self.metadata.name.size() < 4", "!has(self.metadata.generateName)",
	"self.kind == 'Box'", "self.apiVersion == 'example.setpoint.dev/v1'", "!has(self.spec) || self.spec == self.spec"}

// schema returns the root of a random kind's schema: spec is a random node.
func (g *celGen) schema() *apiextensionsv1.JSONSchemaProps {
	spec := g.node(3)
	root := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": *spec}}
	for range g.n(2) {
		root.XValidations = append(root.XValidations, g.ruleOf(root, pick(g, rootRules...)))
	}
	return root
}

// value returns a value for s: most often one of its type, sometimes null
// or one of another type.
func (g *celGen) value(s *apiextensionsv1.JSONSchemaProps, depth int) any {
	switch g.n(14) {
	case 0:
		return nil
	case 1:
		return pick[any](g, "a", int64(1), 1.5, true, map[string]any{}, []any{})
	}
	scalar := func() any {
		switch s.Type {
		case "string":
			return pick(g, celStrings...)
		case "integer":
			return pick(g, int64(0), int64(1), int64(2), int64(-1), int64(7), int64(1)<<53+1, int64(math.MaxInt64))
		case "number":
			return pick[any](g, 0.0, 1.5, -2.25, 1e300, int64(1), int64(3))
		case "boolean":
			return g.chance(50)
		}
		if s.XIntOrString {
			return pick[any](g, "a", "abcd", int64(1), int64(5))
		}
		return nil
	}
	if depth <= 0 {
		return scalar()
	}
	switch {
	case s.XEmbeddedResource:
		m := map[string]any{"apiVersion": pick(g, "v1", "x/v1"), "kind": pick(g, "K", "X")}
		if g.chance(80) {
			m["metadata"] = map[string]any{"name": pick(g, "a", "b", "abc")}
		}
		if g.chance(50) {
			m["spec"] = map[string]any{"a": int64(g.n(3))}
		}
		return m
	case s.Type == "object" && s.AdditionalProperties != nil:
		m := map[string]any{}
		for range g.n(4) {
			m[pick(g, "a", "b", "cc", "ddd")] = g.value(s.AdditionalProperties.Schema, depth-1)
		}
		return m
	case s.Type == "object":
		m := map[string]any{}
		for k, p := range s.Properties {
			if g.chance(75) {
				m[k] = g.value(&p, depth-1)
			}
		}
		if (s.XPreserveUnknownFields != nil || len(s.Properties) == 0) && g.chance(40) {
			m["a"] = pick[any](g, int64(1), "x", map[string]any{"z": int64(2)})
		}
		return m
	case s.Type == "array":
		n := g.n(4)
		if g.chance(10) && !g.long {
			n = pick(g, 20, 60, 120)
			g.long = true
		}
		l := make([]any, n)
		for i := range l {
			if i < 4 && (i == 0 || g.chance(70)) {
				l[i] = g.value(s.Items.Schema, depth-1)
			} else if i < 4 {
				l[i] = deepCopyValue(l[0]) // a duplicate, for list sets and maps
			} else {
				l[i] = l[i%4] // a long list repeats its first items
			}
		}
		return l
	}
	return scalar()
}

// object returns a Box of the schema with a random name and spec.
func (g *celGen) object(s *apiextensionsv1.JSONSchemaProps) map[string]any {
	g.long = false
	obj := map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Box",
		"metadata": map[string]any{"name": pick(g, "b", "box", "abox", "bbbbb"), "namespace": "default"}}
	if g.chance(90) {
		obj["spec"] = g.value(ptrTo(s.Properties["spec"]), 4)
	}
	return obj
}

func ptrTo[T any](v T) *T { return &v }

// celCase is one generated kind schema with objects for it.
type celCase struct {
	schema      *apiextensionsv1.JSONSchemaProps
	structural  *structuralschema.Structural
	objs, olds  []map[string]any
	description string
}

// celCaseOf builds the case of a fuzz input; false when the generated schema
// is not a structural schema a CRD could have.
func celCaseOf(data []byte) (celCase, bool) {
	g := &celGen{data: data}
	root := g.schema()
	in := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(root, in, nil); err != nil {
		return celCase{}, false
	}
	s, err := structuralschema.NewStructural(in)
	if err != nil || len(structuralschema.ValidateStructural(nil, s)) > 0 {
		return celCase{}, false
	}
	c := celCase{schema: root, structural: s}
	for range 4 {
		obj := g.object(root)
		c.objs = append(c.objs, obj)
		switch g.n(3) {
		case 0:
			c.olds = append(c.olds, deepCopyJSON(obj))
		case 1:
			c.olds = append(c.olds, g.object(root))
		default:
			old := deepCopyJSON(obj)
			g.long = false
			old["spec"] = g.value(ptrTo(root.Properties["spec"]), 4)
			c.olds = append(c.olds, old)
		}
	}
	b, _ := json.Marshal(root)
	c.description = string(b)
	return c, true
}

func deepCopyJSON(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return deepCopyJSON(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}

// celOutcomes counts what a check of cases saw.
type celOutcomes struct {
	cases, fast, passes, libraryErrors, listSkips, listErrors int
}

// checkCELCase checks on one case that celPass answers "every rule holds"
// only where the library's validator reports nothing, on a create and on
// an update (with and without ratcheting), and that listNode skips the
// library's list check only where it reports nothing.
func checkCELCase(t *testing.T, c celCase, out *celOutcomes) {
	t.Helper()
	ctx := context.Background()
	s := c.structural
	lib := cel.NewValidator(s, true, celconfig.PerCallLimit)
	pass := newCELPass(s)
	lists := newListNode(s)
	out.cases++
	if pass != nil {
		out.fast++
	} else if lib != nil && os.Getenv("CELFAST_DEBUG") != "" {
		t.Logf("no celPass: %s", c.description)
	}
	for i, obj := range c.objs {
		old := c.olds[i]
		if errs := structurallisttype.ValidateListSetsAndMaps(nil, s, obj); len(errs) > 0 {
			out.listErrors++
			if !lists.mayFail(obj) {
				t.Fatalf("schema %s\nobject %s: listNode skips the list check; the library reports %v", c.description, marshal(obj), errs)
			}
		} else if lists != nil && !lists.mayFail(obj) {
			out.listSkips++
		}
		if lib == nil {
			if pass != nil {
				t.Fatalf("schema %s: a celPass without a validator", c.description)
			}
			continue
		}
		var createErrs field.ErrorList
		createErrs, _ = lib.Validate(ctx, nil, s, obj, nil, celconfig.RuntimeCELCostBudget)
		if len(createErrs) > 0 {
			out.libraryErrors++
		}
		if pass.pass(ctx, obj, nil) {
			out.passes++
			if len(createErrs) > 0 {
				t.Fatalf("schema %s\nobject %s: celPass holds; the validator reports %v", c.description, marshal(obj), createErrs)
			}
		}
		if pass.pass(ctx, obj, old) {
			errs, _ := lib.Validate(ctx, nil, s, obj, old, celconfig.RuntimeCELCostBudget)
			corr := common.NewCorrelatedObject(obj, old, &model.Structural{Structural: s})
			rerrs, _ := lib.Validate(ctx, nil, s, obj, old, celconfig.RuntimeCELCostBudget, cel.WithRatcheting(corr))
			if len(errs)+len(rerrs) > 0 {
				t.Fatalf("schema %s\nobject %s\nold %s: celPass holds on update; the validator reports %v (ratcheting: %v)",
					c.description, marshal(obj), marshal(old), errs, rerrs)
			}
		}
	}
}

func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// celFuzzSeeds are the inputs `go test` runs: random byte strings from a
// fixed seed, enough for every kind of node and rule.
func celFuzzSeeds(n int) [][]byte {
	r := kindstest.NewRand(19)
	seeds := make([][]byte, n)
	for i := range seeds {
		b := make([]byte, 64+r.IntN(192))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		seeds[i] = b
	}
	return seeds
}

// TestCELPassSweep runs the differential check of celPass and listNode
// against the library on generated kinds and objects: never "every rule
// holds" where the validator reports an error, and "every rule holds" on
// many objects the validator accepts.
func TestCELPassSweep(t *testing.T) {
	var out celOutcomes
	for _, seed := range celFuzzSeeds(150) {
		c, ok := celCaseOf(seed)
		if !ok {
			continue
		}
		checkCELCase(t, c, &out)
	}
	t.Logf("%+v", out)
	if out.cases < 50 {
		t.Errorf("%d schemas of 150 generated were structural", out.cases)
	}
	bothOutcomes(t, "celPass holds", out.passes, out.libraryErrors)
	bothOutcomes(t, "list check skipped", out.listSkips, out.listErrors)
	if out.fast < out.cases/2 {
		t.Errorf("celPass for %d of %d kinds", out.fast, out.cases)
	}
}

// FuzzCELPass is TestCELPassSweep on any input: `make fuzz` explores.
func FuzzCELPass(f *testing.F) {
	for _, seed := range celFuzzSeeds(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ok := celCaseOf(data)
		if !ok {
			return
		}
		var out celOutcomes
		checkCELCase(t, c, &out)
	})
}
