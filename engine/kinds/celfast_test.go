package kinds

import (
	"context"
	"strings"
	"testing"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// celBoxSchema has rules at the resource root, in nested properties, in
// list items (a list map), in additional properties, on an embedded
// resource and one that reads oldSelf.
const celBoxSchema = `
        type: object
        x-kubernetes-validations:
        - rule: "self.metadata.name.startsWith('b')"
          message: "name must start with b"
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "!has(self.max) || self.min <= self.max"
              fieldPath: .min
            - rule: "self.min == oldSelf.min"
              message: "min is immutable"
            properties:
              min: {type: integer}
              max: {type: integer}
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  x-kubernetes-validations:
                  - rule: "self.name.size() < 8"
                    messageExpression: "'part ' + self.name + ' has a long name'"
                  properties:
                    name: {type: string}
              weights:
                type: object
                additionalProperties:
                  type: integer
                  x-kubernetes-validations:
                  - rule: "self >= 0"
              inner:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
                x-kubernetes-validations:
                - rule: "self.kind != 'Forbidden'"
              "dotted.name":
                type: object
                x-kubernetes-validations:
                - rule: "self.on"
                properties:
                  "on": {type: boolean}`

func celBox(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestCELPassMatchesValidator checks that the rules' fast answer never
// says "every rule holds" where the apiextensions validator reports an
// error, that it does say so for objects the validator accepts, and that
// the kind's validation gives the strategy's errors either way.
func TestCELPassMatchesValidator(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	sv, ok := serveBoxes(t, r, celBoxSchema)
	if !ok {
		t.Fatal("boxes not served")
	}
	cv := sv.createValidation
	if cv.celPass == nil {
		t.Fatal("Box has no celPass")
	}
	if !cv.celPass.oldSelf {
		t.Error("celPass.oldSelf false; the schema has a rule that reads oldSelf")
	}
	if wsv, _ := r.Get(widgets); wsv.createValidation.celPass == nil {
		t.Error("Widget has no celPass")
	}
	const head = `{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":%q,"namespace":"default"},"spec":`
	for _, tc := range []struct {
		name, meta, spec string
		valid            bool
	}{
		{"empty spec", "box", `{}`, true},
		{"all rules hold", "box", `{"min":1,"max":2,"parts":[{"name":"a"},{"name":"b"}],"weights":{"x":1,"y":0},"inner":{"apiVersion":"v1","kind":"K","metadata":{"name":"i"}},"dotted.name":{"on":true}}`, true},
		{"root rule broken", "abox", `{}`, false},
		{"field path rule broken", "box", `{"min":3,"max":2}`, false},
		{"min without max", "box", `{"min":3}`, true},
		{"item rule broken", "box", `{"parts":[{"name":"a"},{"name":"toolongname"}]}`, false},
		{"additional property rule broken", "box", `{"weights":{"x":1,"y":-1}}`, false},
		{"embedded rule broken", "box", `{"inner":{"apiVersion":"v1","kind":"Forbidden","metadata":{"name":"i"}}}`, false},
		{"escaped property rule broken", "box", `{"dotted.name":{"on":false}}`, false},
		{"runtime error", "box", `{"dotted.name":{}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := celBox(t, strings.Replace(head, "%q", `"`+tc.meta+`"`, 1)+tc.spec+`}`)
			lib, _ := cv.cel.Validate(ctx, nil, cv.structural, u.Object, nil, 1<<40)
			pass := cv.celPass.pass(ctx, u.Object, nil)
			if pass != (len(lib) == 0) {
				t.Errorf("celPass %v; the validator reports %v", pass, lib)
			}
			if pass != tc.valid {
				t.Errorf("celPass %v, want %v", pass, tc.valid)
			}
			errs := sameValidation(t, sv, u)
			if (len(errs) == 0) != tc.valid {
				t.Errorf("errors %v, want valid %v", describe(errs), tc.valid)
			}
			// An update whose rules read oldSelf is left to the validator.
			if cv.celPass.pass(ctx, u.Object, u.DeepCopy().Object) {
				t.Error("celPass answered for an update of a kind with an oldSelf rule")
			}
		})
	}
}

// TestCELPassBudget checks that a rule whose cost passes the runtime
// budget is left to the validator, which reports the budget error.
func TestCELPassBudget(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	// Each find costs (0.1 x 4,000) x (0.25 x 4,000) = 400,000, under the
	// per-call limit; 30 of them pass the budget of 10,000,000.
	sv, ok := serveBoxes(t, r, `
        type: object
        properties:
          spec:
            type: object
            properties:
              finds:
                type: array
                maxItems: 30
                items:
                  type: object
                  x-kubernetes-validations:
                  - rule: "self.text.find(self.pattern) == ''"
                  properties:
                    text: {type: string, maxLength: 4000}
                    pattern: {type: string, maxLength: 4000}`)
	if !ok {
		t.Fatal("boxes not served")
	}
	cv := sv.createValidation
	finds := make([]any, 30)
	for i := range finds {
		finds[i] = map[string]any{"text": strings.Repeat("a", 4000), "pattern": strings.Repeat("z", 4000)}
	}
	u := kindstest.Box("box", 0)
	u.Object["spec"] = map[string]any{"finds": finds}
	if cv.celPass.pass(ctx, u.Object, nil) {
		t.Fatal("celPass holds past the runtime cost budget")
	}
	errs := sameValidation(t, sv, u)
	if len(errs) == 0 || !strings.Contains(describe(errs)[0], "cost budget") {
		t.Errorf("errors %v, want the budget error", describe(errs))
	}
	u.Object["spec"] = map[string]any{"finds": finds[:3]}
	if !cv.celPass.pass(ctx, u.Object, nil) {
		t.Error("celPass not sure of three finds")
	}
}

// TestCELPassFollowsSchema checks that a kind served again with a new
// schema validates against its new rules, not the ones its previous
// schema compiled.
func TestCELPassFollowsSchema(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	schema := func(limit string) string {
		return `
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.count < ` + limit + `"
              message: "count below ` + limit + `"
            properties:
              count: {type: integer}`
	}
	u := celBox(t, `{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"b","namespace":"default"},"spec":{"count":5}}`)
	for _, tc := range []struct {
		limit string
		want  string
	}{
		{"10", ""},
		{"3", "count below 3"},
		{"6", ""},
	} {
		sv, ok := serveBoxes(t, r, schema(tc.limit))
		if !ok {
			t.Fatal("boxes not served")
		}
		errs := sameValidation(t, sv, u)
		got := strings.Join(describe(errs), "; ")
		if tc.want == "" && len(errs) > 0 || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("limit %s: errors %q, want %q", tc.limit, got, tc.want)
		}
		if pass := sv.createValidation.celPass.pass(ctx, u.Object, nil); pass != (tc.want == "") {
			t.Errorf("limit %s: celPass %v", tc.limit, pass)
		}
	}
}

// structuralOf returns the structural schema of an OpenAPI v3 schema in
// YAML, as a CRD version's.
func structuralOf(t testing.TB, doc string) *structuralschema.Structural {
	t.Helper()
	var v1 apiextensionsv1.JSONSchemaProps
	if err := yaml.Unmarshal([]byte(doc), &v1); err != nil {
		t.Fatal(err)
	}
	in := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1, in, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(in)
	if err != nil {
		t.Fatal(err)
	}
	if errs := structuralschema.ValidateStructural(nil, s); len(errs) > 0 {
		t.Fatal(errs)
	}
	return s
}

// TestCELPassBudgetEndsAtZero checks the one case where the validator's
// answer depends on the order it walks an object's fields in: the rules
// use up the runtime budget exactly, and a node with rules (here only a
// transition rule, skipped on a create) is visited after that (the
// validator reports the budget error) or before (it reports nothing).
// celPass must not say "every rule holds" when one order gives the error.
func TestCELPassBudgetEndsAtZero(t *testing.T) {
	ctx := context.Background()
	s := structuralOf(t, `
type: object
properties:
  spec:
    type: object
    properties:
      items:
        type: array
        maxItems: 20
        items:
          type: object
          x-kubernetes-validations:
          - rule: "!self.s.matches('z`+strings.Repeat("y", 3999)+`')"
          properties:
            s: {type: string, maxLength: 9000}
      pad:
        type: string
        maxLength: 10000000
        x-kubernetes-validations:
        - rule: "!self.contains('z')"
      other:
        type: object
        x-kubernetes-validations:
        - rule: "self == oldSelf"
        properties:
          on: {type: boolean}`)
	p := newCELPass(s)
	if p == nil {
		t.Fatal("no celPass")
	}
	cost := func(spec map[string]any) int64 {
		budget := int64(celconfig.RuntimeCELCostBudget)
		if !p.root.pass(ctx, map[string]any{"spec": spec}, &budget) {
			t.Fatal("rules broken or budget used up")
		}
		return celconfig.RuntimeCELCostBudget - budget
	}
	// Items whose rule costs about 900,000 each (under the per-call limit),
	// and a string whose rule costs a tenth of its length more than the empty
	// string's, to make up
	// the rest of the budget of 10,000,000 exactly.
	item := map[string]any{"s": strings.Repeat("a", 9000)}
	per := cost(map[string]any{"items": []any{item}})
	items := make([]any, celconfig.RuntimeCELCostBudget/per-1)
	for i := range items {
		items[i] = item
	}
	rest := celconfig.RuntimeCELCostBudget - int64(len(items))*per - cost(map[string]any{"pad": ""})
	spec := map[string]any{"items": items, "pad": strings.Repeat("a", int(10*rest))}
	if c := cost(spec); c != celconfig.RuntimeCELCostBudget {
		t.Fatalf("the rules cost %d, want the budget", c)
	}
	spec["other"] = map[string]any{"on": true}
	obj := map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Box", "metadata": map[string]any{"name": "b"}, "spec": spec}
	lib := cel.NewValidator(s, true, celconfig.PerCallLimit)
	libErr := false
	for range 24 {
		if errs, _ := lib.Validate(ctx, nil, s, obj, nil, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
			if !strings.Contains(errs.ToAggregate().Error(), "cost budget") {
				t.Fatalf("validator: %v, want the budget error", errs)
			}
			libErr = true
		}
	}
	if !libErr {
		t.Fatal("the validator never walked the transition rule's node last")
	}
	for range 24 {
		if p.pass(ctx, obj, nil) {
			t.Fatalf("celPass holds with the budget used up exactly; the validator may report the budget error")
		}
	}
	// A shorter string leaves budget over: every order passes.
	spec["pad"] = "a"
	if errs, _ := lib.Validate(ctx, nil, s, obj, nil, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if !p.pass(ctx, obj, nil) {
		t.Error("celPass not sure with budget left")
	}
}

// TestCELPassConstructs checks celPass against the validator on one kind
// of schema node or rule at a time: where it says "every rule holds" the
// validator reports nothing (on a create and on an update, with
// ratcheting), and it does say so where the validator reports nothing,
// but for the constructs it leaves to the validator.
func TestCELPassConstructs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, spec string // the schema of spec, and its values in JSON
		values     []string
		holds      []bool // on a create; nil: no celPass
		old        string // an old spec for an update, when not empty
	}{
		{"escaped property names", `
type: object
x-kubernetes-validations:
- rule: "self.x__dash__y == 1 && self.x__dot__y == 'a' && self.__in__ && self.__underscores__u__underscores__ == 2"
properties:
  x-y: {type: integer}
  x.y: {type: string}
  in: {type: boolean}
  __u__: {type: integer}`,
			[]string{`{"x-y":1,"x.y":"a","in":true,"__u__":2}`, `{"x-y":1,"x.y":"a","in":false,"__u__":2}`, `{"x-y":1}`}, []bool{true, false, false}, ""},
		{"null in a nullable field", `
type: object
x-kubernetes-validations:
- rule: "!has(self.nn) || self.nn.size() > 3"
properties:
  nn:
    type: string
    nullable: true
    x-kubernetes-validations:
    - rule: "self.size() > 3"`,
			[]string{`{"nn":null}`, `{"nn":"abcd"}`, `{"nn":"ab"}`}, []bool{true, true, false}, ""},
		{"int-or-string", `
type: object
properties:
  v:
    x-kubernetes-int-or-string: true
    x-kubernetes-validations:
    - rule: "type(self) == int ? self < 5 : self.size() < 3"`,
			[]string{`{"v":3}`, `{"v":"ab"}`, `{"v":7}`, `{"v":"abcd"}`}, []bool{true, true, false, false}, ""},
		{"fields kept as they come", `
type: object
x-kubernetes-preserve-unknown-fields: true
x-kubernetes-validations:
- rule: "has(self.a) && self.a == 1"
properties:
  a: {type: integer}`,
			[]string{`{"a":1,"z":{"y":2}}`, `{"a":2}`, `{"y":1}`}, []bool{true, false, false}, ""},
		{"embedded resource", `
type: object
properties:
  inner:
    type: object
    x-kubernetes-embedded-resource: true
    x-kubernetes-preserve-unknown-fields: true
    x-kubernetes-validations:
    - rule: "self.metadata.name == 'x' && self.kind == 'K'"`,
			[]string{`{"inner":{"apiVersion":"v1","kind":"K","metadata":{"name":"x"}}}`, `{"inner":{"apiVersion":"v1","kind":"K","metadata":{"name":"y"}}}`}, []bool{true, false}, ""},
		{"additional properties", `
type: object
properties:
  m:
    type: object
    additionalProperties:
      type: integer
      x-kubernetes-validations:
      - rule: "self != 3"
    x-kubernetes-validations:
    - rule: "self.all(k, self[k] > 0)"`,
			[]string{`{"m":{"a":1,"b":2}}`, `{"m":{"a":1,"b":0}}`, `{"m":{"a":3}}`}, []bool{true, false, false}, ""},
		{"lists of lists and list maps", `
type: object
properties:
  ll:
    type: array
    items: {type: array, items: {type: integer}, x-kubernetes-validations: [{rule: "self.size() < 3"}]}
    x-kubernetes-validations:
    - rule: "self.all(l, l.all(x, x > 0))"
  lm:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [name]
    items:
      type: object
      required: [name]
      properties:
        name: {type: string}
        v: {type: integer}
    x-kubernetes-validations:
    - rule: "self.exists(e, e.name == 'a')"`,
			[]string{`{"ll":[[1,2],[3]],"lm":[{"name":"a"}]}`, `{"ll":[[1,0]]}`, `{"ll":[[1,2,3]]}`, `{"lm":[{"name":"b","v":1}]}`}, []bool{true, false, false, false}, ""},
		{"formats", `
type: object
properties:
  d: {type: string, format: duration, x-kubernetes-validations: [{rule: "self > duration('1s')"}]}
  t: {type: string, format: date-time, x-kubernetes-validations: [{rule: "self.getFullYear() == 2020"}]}
  day: {type: string, format: date, x-kubernetes-validations: [{rule: "self < timestamp('2021-01-01T00:00:00Z')"}]}`,
			[]string{`{"d":"2s","t":"2020-05-01T00:00:00Z","day":"2020-01-01"}`, `{"d":"500ms"}`, `{"t":"2021-05-01T00:00:00Z"}`, `{"day":"2022-01-01"}`}, []bool{true, false, false, false}, ""},
		{"libraries", `
type: object
properties:
  q: {type: string, x-kubernetes-validations: [{rule: "quantity(self).isGreaterThan(quantity('1Gi'))"}]}
  c: {type: string, x-kubernetes-validations: [{rule: "isCIDR(self) && cidr(self).containsIP('10.0.0.1')"}]}
  u: {type: string, x-kubernetes-validations: [{rule: "isURL(self) && url(self).getHost() == 'x.y'"}]}
  r: {type: string, x-kubernetes-validations: [{rule: "self.matches('^a+$') && self.find('a+') == self"}]}
  l: {type: array, items: {type: integer}, x-kubernetes-validations: [{rule: "self.isSorted() && self.sum() < 10"}]}`,
			[]string{`{"q":"2Gi","c":"10.0.0.0/8","u":"https://x.y/z","r":"aa","l":[1,2]}`, `{"q":"1Mi"}`, `{"q":"x"}`, `{"c":"11.0.0.0/8"}`, `{"u":"nope"}`, `{"r":"ab"}`, `{"l":[2,1]}`},
			[]bool{true, false, false, false, false, false, false}, ""},
		{"per-call cost limit", `
type: object
properties:
  s:
    type: string
    maxLength: 20000
    x-kubernetes-validations:
    - rule: "!self.matches('z` + strings.Repeat("y", 3999) + `')"`,
			// 0.1 x 12,000 x 0.25 x 4,000 is past the limit of 1,000,000.
			[]string{`{"s":"aaa"}`, `{"s":"` + strings.Repeat("a", 12000) + `"}`}, []bool{true, false}, ""},
		{"messageExpression, fieldPath and reason", `
type: object
x-kubernetes-validations:
- rule: "self.a < 3"
  messageExpression: "'a is ' + string(self.a)"
  fieldPath: ".a"
  reason: FieldValueForbidden
properties:
  a: {type: integer}`,
			[]string{`{"a":1}`, `{"a":5}`}, []bool{true, false}, `{"a":5}`},
		{"optional oldSelf", `
type: object
x-kubernetes-validations:
- rule: "!oldSelf.hasValue() || oldSelf.value().a <= self.a"
  optionalOldSelf: true
properties:
  a: {type: integer}`,
			[]string{`{"a":1}`}, nil, `{"a":2}`},
		{"transition rule", `
type: object
x-kubernetes-validations:
- rule: "self.a >= oldSelf.a"
- rule: "self.a < 10"
properties:
  a: {type: integer}`,
			[]string{`{"a":1}`, `{"a":11}`}, []bool{true, false}, `{"a":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := "type: object\nx-kubernetes-validations:\n- rule: \"self.metadata.name.startsWith('b')\"\nproperties:\n  spec:\n" +
				"    " + strings.ReplaceAll(strings.TrimPrefix(tc.spec, "\n"), "\n", "\n    ")
			s := structuralOf(t, root)
			p := newCELPass(s)
			lib := cel.NewValidator(s, true, celconfig.PerCallLimit)
			if tc.holds == nil {
				if p != nil {
					t.Fatal("celPass for a kind it cannot answer for")
				}
				return
			}
			if p == nil {
				t.Fatal("no celPass")
			}
			for i, v := range tc.values {
				for _, name := range []string{"box", "abox"} {
					obj := celBox(t, `{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"`+name+`"},"spec":`+v+`}`).Object
					errs, _ := lib.Validate(ctx, nil, s, obj, nil, celconfig.RuntimeCELCostBudget)
					pass := p.pass(ctx, obj, nil)
					if pass && len(errs) > 0 {
						t.Fatalf("%s %s: celPass holds; the validator reports %v", name, v, errs)
					}
					if want := tc.holds[i] && name == "box"; pass != want {
						t.Errorf("%s %s: celPass %v, want %v (validator: %v)", name, v, pass, want, errs)
					}
					if tc.name == "per-call cost limit" && !tc.holds[i] && !strings.Contains(errs.ToAggregate().Error(), "call cost exceeds limit") {
						t.Errorf("validator: %v, want the per-call limit's error", errs)
					}
					if tc.old == "" {
						continue
					}
					old := celBox(t, `{"apiVersion":"example.setpoint.dev/v1","kind":"Box","metadata":{"name":"`+name+`"},"spec":`+tc.old+`}`).Object
					corr := common.NewCorrelatedObject(obj, old, &model.Structural{Structural: s})
					rerrs, _ := lib.Validate(ctx, nil, s, obj, old, celconfig.RuntimeCELCostBudget, cel.WithRatcheting(corr))
					if p.pass(ctx, obj, old) && len(rerrs) > 0 {
						t.Fatalf("%s %s from %s: celPass holds; the validator reports %v", name, v, tc.old, rerrs)
					}
				}
			}
		})
	}
}
