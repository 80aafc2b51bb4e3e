package kinds

import (
	"fmt"
	"strings"

	"k8s.io/kube-openapi/pkg/validation/errors"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// The logical junctors (allOf, anyOf, oneOf, not) of a node are validated
// here rather than by kube-openapi's schemaPropsValidator, which builds the
// validator of each branch without the options of its parent: the branch's
// properties and items would be validated by plain validators, uncounted,
// and a branch reaching into a list of n failing items would cost n² again.
// Here each branch is a SchemaValidator with the run's option, so every node
// below it is a boundedNode. The logic and messages are the library's
// (kube-openapi pkg/validation/validate/schema_props.go, Apache 2.0), with
// one difference: the errors of a branch whose result is dropped (a failing
// anyOf or oneOf alternative that is not the best failure, a not) are not
// counted against MaxValidationErrors, so that a valid alternative is still
// tried after a long failing one.

// hasJunctors tells whether s has a logical junctor.
func hasJunctors(s *spec.Schema) bool {
	return len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0 || s.Not != nil
}

// withoutJunctors returns a shallow copy of s without its junctors.
func withoutJunctors(s *spec.Schema) *spec.Schema {
	c := *s
	c.AllOf, c.AnyOf, c.OneOf, c.Not = nil, nil, nil, nil
	return &c
}

// branch validates data against one junctor branch, as a SchemaValidator of
// n's path whose children are bounded. Unless counted, the errors below it
// are not counted against the run's limit (its count is restored); a branch
// cut short by the limit marks the run cut when its result is used.
func (n *boundedNode) branch(s *spec.Schema, data any, counted bool) (*validate.Result, bool) {
	r := n.run
	errs, below, stopped := r.errs, r.below, r.stopped
	res := validate.NewSchemaValidator(onlyPresent(s, data), n.root, n.path, n.formats, r.opt).Validate(data)
	cut := r.stopped == errTooManyErrors && stopped == nil
	if !counted {
		r.errs, r.below = errs, below
		if cut {
			r.stopped = nil
		}
	}
	return res, cut
}

// junctors validates data against n's junctors as schemaPropsValidator
// does (dependencies excepted: they stay with the node's own validator).
func (n *boundedNode) junctors(data any) *validate.Result {
	s, r := n.schema, n.run
	main := new(validate.Result)
	keepAnyOf, keepOneOf, keepAllOf := new(validate.Result), new(validate.Result), new(validate.Result)
	use := func(res *validate.Result, cut bool) {
		if cut {
			r.cut = true
		}
		main.Merge(res)
	}

	if len(s.AnyOf) > 0 {
		var best, firstSuccess *validate.Result
		var bestCut, successCut bool
		succeeded := false
		for i := range s.AnyOf {
			res, cut := n.branch(&s.AnyOf[i], data, false)
			keepAnyOf.Merge(keepRelevantErrors(res))
			if res.IsValid() {
				best, succeeded = nil, true
				if firstSuccess == nil {
					firstSuccess, successCut = res, cut
				}
				keepAnyOf = new(validate.Result)
				break
			}
			if best == nil || res.MatchCount > best.MatchCount {
				best, bestCut = res, cut
			}
		}
		if !succeeded {
			main.AddErrors(errors.New(errors.CompositeErrorCode, validate.MustValidateAtLeastOneSchemaError, n.path))
		}
		if best != nil {
			use(best, bestCut)
		} else if firstSuccess != nil {
			use(firstSuccess, successCut)
		}
	}

	if len(s.OneOf) > 0 {
		var best, firstSuccess *validate.Result
		var bestCut, successCut bool
		validated := 0
		for i := range s.OneOf {
			res, cut := n.branch(&s.OneOf[i], data, false)
			keepOneOf.Merge(keepRelevantErrors(res))
			if res.IsValid() {
				validated++
				best = nil
				if firstSuccess == nil {
					firstSuccess, successCut = res, cut
				}
				keepOneOf = new(validate.Result)
				continue
			}
			if validated == 0 && (best == nil || res.MatchCount > best.MatchCount) {
				best, bestCut = res, cut
			}
		}
		if validated != 1 {
			msg := "Found none valid"
			if validated > 1 {
				msg = fmt.Sprintf("Found %d valid alternatives", validated)
			}
			main.AddErrors(errors.New(errors.CompositeErrorCode, validate.MustValidateOnlyOneSchemaError, n.path, msg))
			if best != nil {
				use(best, bestCut)
			}
		} else if firstSuccess != nil {
			use(firstSuccess, successCut)
		}
	}

	if len(s.AllOf) > 0 {
		validated := 0
		for i := range s.AllOf {
			res, _ := n.branch(&s.AllOf[i], data, true)
			keepAllOf.Merge(keepRelevantErrors(res))
			if res.IsValid() {
				validated++
			}
			main.Merge(res)
		}
		if validated != len(s.AllOf) {
			msg := ""
			if validated == 0 {
				msg = ". None validated"
			}
			main.AddErrors(errors.New(errors.CompositeErrorCode, validate.MustValidateAllSchemasError, n.path, msg))
		}
	}

	if s.Not != nil {
		if res, _ := n.branch(s.Not, data, false); res.IsValid() {
			main.AddErrors(errors.New(errors.CompositeErrorCode, validate.MustNotValidateSchemaError, n.path))
		}
	}

	main.Inc()
	return main.Merge(keepAllOf, keepOneOf, keepAnyOf)
}

// keepRelevantErrors is the library's: the errors and warnings of r marked
// "IMPORTANT!", without the mark.
func keepRelevantErrors(r *validate.Result) *validate.Result {
	out := new(validate.Result)
	for _, e := range r.Errors {
		if m := e.Error(); strings.HasPrefix(m, "IMPORTANT!") {
			out.Errors = append(out.Errors, fmt.Errorf("%s", strings.TrimPrefix(m, "IMPORTANT!")))
		}
	}
	for _, e := range r.Warnings {
		if m := e.Error(); strings.HasPrefix(m, "IMPORTANT!") {
			out.Warnings = append(out.Warnings, fmt.Errorf("%s", strings.TrimPrefix(m, "IMPORTANT!")))
		}
	}
	return out
}
