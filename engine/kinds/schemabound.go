package kinds

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// MaxValidationErrors is how many schema errors one validation collects
// before it stops, and how many field errors a 422 Invalid answer lists.
//
// The OpenAPI validator of kube-openapi merges the result of every node into
// its parent's with Result.Merge, whose AddErrors compares each new error
// with every error already in the result (a de-duplication by message): n
// failing list items cost n²/2 string comparisons at each level above them,
// and an enum error carries the whole enum in its message. Counting the
// errors as nodes report them and validating no further node once the count
// is reached keeps every merged result under about this many errors, so a
// validation costs one walk of the object plus a constant.
const MaxValidationErrors = 100

// boundedSchemaValidator is the OpenAPI schema validation of a custom
// resource (the apiextensions SchemaValidator, whose errors it keeps; the
// logical junctors are validated in schemajunctors.go) that stops after
// MaxValidationErrors errors or when its context ends, rather than
// collecting every error of a hostile object at a quadratic cost, and that
// validates an object against the properties it has (onlyPresent). Updates are ratcheted by the library's validator once the
// new object is known to have at most MaxValidationErrors errors (ratcheting
// only drops errors, so that validation stays as small).
type boundedSchemaValidator struct {
	schema *spec.Schema
	// lib is the apiextensions validator of the same schema, for ratcheting.
	lib apiservervalidation.SchemaValidator
	max int
	// fast accepts the objects certainly valid without the library's walk
	// (schemafast.go); nil validates every object with the library.
	fast *fastSchema
}

var _ apiservervalidation.SchemaValidator = (*boundedSchemaValidator)(nil)

// newBoundedSchemaValidator returns the validator of props.
func newBoundedSchemaValidator(props *apiextensions.JSONSchemaProps) (*boundedSchemaValidator, error) {
	lib, s, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, err
	}
	return &boundedSchemaValidator{schema: s, lib: lib, max: MaxValidationErrors, fast: compileFast(s)}, nil
}

// schemaValidator returns v as the library's interface: a nil v is a nil
// interface, as the custom resource strategy expects of a kind without one.
func (v *boundedSchemaValidator) schemaValidator() apiservervalidation.SchemaValidator {
	if v == nil {
		return nil
	}
	return v
}

// Validate validates obj without a deadline (the strategy's path).
func (v *boundedSchemaValidator) Validate(obj any, _ ...apiservervalidation.ValidationOption) *validate.Result {
	return v.withContext(context.Background()).Validate(obj)
}

// ValidateUpdate validates obj, ratcheted against old when options ask it.
func (v *boundedSchemaValidator) ValidateUpdate(obj, old any, options ...apiservervalidation.ValidationOption) *validate.Result {
	return v.withContext(context.Background()).ValidateUpdate(obj, old, options...)
}

// withContext returns the validator for one request: it stops when ctx ends
// and reports whether it stopped early.
func (v *boundedSchemaValidator) withContext(ctx context.Context) *boundedRequest {
	return &boundedRequest{v: v, ctx: ctx}
}

// boundedRequest is a boundedSchemaValidator bound to one request's context;
// stopped is set when its last validation stopped before the end of the
// object (too many errors, or the context ended).
type boundedRequest struct {
	v       *boundedSchemaValidator
	ctx     context.Context
	stopped bool
}

var _ apiservervalidation.SchemaValidator = (*boundedRequest)(nil)

// Validate validates obj as the apiextensions validator does, up to the
// error limit; a validation that stopped early ends with an error that says
// so.
func (b *boundedRequest) Validate(obj any, _ ...apiservervalidation.ValidationOption) *validate.Result {
	if b.v.fast != nil && b.v.fast.valid(obj) {
		return new(validate.Result)
	}
	run := &boundedRun{ctx: b.ctx, max: b.v.max}
	run.opt = run.option()
	root := &boundedNode{run: run, schema: b.v.schema, root: b.v.schema, formats: strfmt.Default}
	res := root.Validate(obj)
	b.stopped = run.stopped != nil || run.cut
	switch {
	case run.stopped == errTooManyErrors || run.stopped == nil && run.cut:
		res.Errors = append(res.Errors, fmt.Errorf("too many errors: validation stopped after %d", run.max))
	case run.stopped != nil:
		res.Errors = append(res.Errors, fmt.Errorf("validation stopped: %w", run.stopped))
	}
	return res
}

// ValidateUpdate validates obj alone first: a valid object, one with too
// many errors or a request that ended is answered from that; otherwise (a
// few errors, which ratcheting may forgive) the library ratchets them.
func (b *boundedRequest) ValidateUpdate(obj, old any, options ...apiservervalidation.ValidationOption) *validate.Result {
	res := b.Validate(obj)
	if res.IsValid() || b.stopped || !apiservervalidation.NewValidationOptions(options...).Ratcheting {
		return res
	}
	return b.v.lib.ValidateUpdate(obj, old, options...)
}

var errTooManyErrors = fmt.Errorf("too many errors")

// boundedRun is the state of one validation, shared by its nodes (the
// validator walks the object depth first, on one goroutine).
type boundedRun struct {
	ctx context.Context
	max int
	opt validate.Option
	// errs counts the errors the validated nodes reported themselves (not
	// those merged up from their children).
	errs int
	// below counts the errors in the results returned by the children of
	// the node being validated.
	below int
	// nodes counts validated nodes, to look at the context now and then.
	nodes int
	// stopped is why validation stopped: errTooManyErrors or ctx.Err().
	stopped error
	// cut is set when a junctor branch stopped at the limit and its errors
	// are in the result: they are not all the branch's.
	cut bool
}

// option makes the validator build a boundedNode for every property and
// item, so that each is counted and can be skipped.
func (r *boundedRun) option() validate.Option {
	return func(o *validate.SchemaValidatorOptions) {
		o.NewValidatorForField = func(_ string, s *spec.Schema, root any, path string, f strfmt.Registry, _ ...validate.Option) validate.ValueValidator {
			return &boundedNode{run: r, schema: s, root: root, path: path, formats: f}
		}
		o.NewValidatorForIndex = func(_ int, s *spec.Schema, root any, path string, f strfmt.Registry, _ ...validate.Option) validate.ValueValidator {
			return &boundedNode{run: r, schema: s, root: root, path: path, formats: f}
		}
	}
}

// stop tells whether validation must go no further.
func (r *boundedRun) stop() bool {
	if r.stopped != nil {
		return true
	}
	if r.errs >= r.max {
		r.stopped = errTooManyErrors
		return true
	}
	if r.nodes++; r.nodes%64 == 0 {
		if err := r.ctx.Err(); err != nil {
			r.stopped = err
			return true
		}
	}
	return false
}

// boundedNode validates one value against its schema with the library's
// SchemaValidator, counting the errors it adds; once the run has stopped it
// validates nothing.
type boundedNode struct {
	run     *boundedRun
	schema  *spec.Schema
	root    any
	path    string
	formats strfmt.Registry
}

var _ validate.ValueValidator = (*boundedNode)(nil)

func (n *boundedNode) SetPath(path string) { n.path = path }

func (n *boundedNode) Applies(any, reflect.Kind) bool { return true }

func (n *boundedNode) Validate(data any) *validate.Result {
	r := n.run
	if r.stop() {
		return new(validate.Result)
	}
	outer := r.below
	r.below = 0
	var res *validate.Result
	if hasJunctors(n.schema) && data != nil {
		// The junctors first, as the library validates them right after
		// the type; the node's own validator then does the rest (its empty
		// junctor validator adds one to the match count, taken off). A
		// null is checked only for its type and enum, junctors not, as
		// the library's SchemaValidator does.
		res = n.junctors(data)
		res.Merge(validate.NewSchemaValidator(onlyPresent(withoutJunctors(n.schema), data), n.root, n.path, n.formats, r.opt).Validate(data))
		res.MatchCount--
	} else {
		res = validate.NewSchemaValidator(onlyPresent(n.schema, data), n.root, n.path, n.formats, r.opt).Validate(data)
	}
	if own := len(res.Errors) - r.below; own > 0 {
		r.errs += own
	}
	r.below = outer + len(res.Errors)
	return res
}

// onlyPresent returns s with only the properties data has, when data is an
// object with far fewer keys than s has properties. The library's object
// validator walks every property of the schema for every object it
// validates (copying each property's schema), though only those the object
// has are validated and the others are only looked up by the object's keys:
// a list of 300,000 empty objects against 1000 properties took minutes.
// With the absent properties left out the result is the same, and the cost
// follows the object.
func onlyPresent(s *spec.Schema, data any) *spec.Schema {
	m, ok := data.(map[string]any)
	if !ok || len(s.Properties) <= 2*len(m)+8 {
		return s
	}
	c := *s
	c.Properties = make(map[string]spec.Schema, len(m))
	for k := range m {
		if p, ok := s.Properties[k]; ok {
			c.Properties[k] = p
		}
	}
	return &c
}
