package kinds

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

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
