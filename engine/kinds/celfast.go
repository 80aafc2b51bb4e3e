package kinds

import (
	"context"
	"math"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
)

// celPass answers, for a kind's x-kubernetes-validations rules, "every rule
// holds" or "not sure", as schemafast does for the OpenAPI schema: only
// "not sure" objects go through the apiextensions CEL validator, which then
// gives the errors, so its messages, field paths, reasons and budget
// errors stay the only ones a client sees.
//
// The validator evaluates the same programs on the same values; what it
// repeats on every call, celPass does once per kind version: its activation
// wraps each schema node in an adapter whose Properties() builds a fresh map
// of fresh copies of every property's schema at each field a rule reads,
// and the resource root's schema is rebuilt with its type and object meta
// at each call. celPass compiles the rules with the validator's own
// compiler, environment and limits, and wraps the schema once in
// celSchema, which keeps those maps.
//
// It mirrors the validator's walk for a value without an old value:
// the rules of each node, then the items of an array, the additional
// properties and the properties of an object, with one runtime cost
// budget over the whole object (not sure when it ends used up: the
// validator's field order then decides). Rules that read oldSelf are skipped there
// as the validator skips them, unless oldSelf is optional; a kind with
// such a rule, with a rule that does not compile, or with rules under
// allOf has no celPass.
type celPass struct {
	root *celNode
	// oldSelf tells whether a rule reads oldSelf: celPass then answers
	// only for creates.
	oldSelf bool
}

// celNode is the part of celPass at one schema node.
type celNode struct {
	schema   common.Schema // what self is built with
	programs []celgo.Program
	compiled bool // the node has rules, evaluated or skipped
	props    map[string]*celNode
	items    *celNode
	addl     *celNode
}

// newCELPass returns the celPass of a kind's structural schema; nil when
// the schema has no rules or celPass cannot answer for it.
func newCELPass(s *structuralschema.Structural) *celPass {
	if s == nil {
		return nil
	}
	p := &celPass{}
	root, ok := p.node(s, true, model.SchemaDeclType(s, true))
	if !ok || root == nil {
		return nil
	}
	p.root = root
	return p
}

// node builds the celNode of s as the validator builds its own: the same
// declared types, the same compilation, the same nodes skipped.
func (p *celPass) node(s *structuralschema.Structural, resourceRoot bool, declType *apiservercel.DeclType) (*celNode, bool) {
	if s.ValueValidation != nil && len(s.ValueValidation.AllOf) > 0 {
		return nil, false
	}
	n := &celNode{}
	if len(s.XValidations) > 0 {
		compilation := *s
		results, err := cel.Compile(&compilation, declType, celconfig.PerCallLimit,
			environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()), cel.StoredExpressionsEnvLoader())
		if err != nil {
			return nil, false
		}
		for i, r := range results {
			if r.Error != nil {
				return nil, false
			}
			if r.UsesOldSelf {
				p.oldSelf = true
				if o := s.XValidations[i].OptionalOldSelf; o != nil && *o {
					return nil, false
				}
				continue // not evaluated without an old value
			}
			if r.Program != nil {
				n.programs = append(n.programs, r.Program)
			}
		}
		n.compiled = len(results) > 0
		self := s
		if resourceRoot {
			self = model.WithTypeAndObjectMeta(s)
		}
		n.schema = newCELSchema(self)
	}
	var elem *apiservercel.DeclType
	if declType != nil {
		elem = declType.ElemType
	}
	if s.Items != nil {
		c, ok := p.node(s.Items, s.Items.XEmbeddedResource, elem)
		if !ok {
			return nil, false
		}
		n.items = c
	}
	for k := range s.Properties {
		prop := s.Properties[k]
		var fieldType *apiservercel.DeclType
		if escaped, ok := apiservercel.Escape(k); ok {
			if declType == nil {
				continue
			}
			f, ok := declType.Fields[escaped]
			if !ok {
				continue // fields of unknown types are not validated
			}
			fieldType = f.Type
		} else if fieldType = model.SchemaDeclType(&prop, prop.XEmbeddedResource); fieldType == nil {
			continue
		}
		c, ok := p.node(&prop, prop.XEmbeddedResource, fieldType)
		if !ok {
			return nil, false
		}
		if c != nil {
			if n.props == nil {
				n.props = map[string]*celNode{}
			}
			n.props[k] = c
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		a := s.AdditionalProperties.Structural
		c, ok := p.node(a, a.XEmbeddedResource, elem)
		if !ok {
			return nil, false
		}
		n.addl = c
	}
	if !n.compiled && n.items == nil && n.addl == nil && n.props == nil {
		return nil, true
	}
	return n, true
}

// pass reports whether every rule holds on obj, whose old value is old (nil
// on a create). False means "not sure": the validator decides.
func (p *celPass) pass(ctx context.Context, obj, old any) bool {
	if p == nil || (old != nil && p.oldSelf) {
		return false
	}
	budget := int64(celconfig.RuntimeCELCostBudget)
	// With the budget used up exactly, the validator's answer depends on
	// the order it walks map fields in: a node with rules walked after
	// that gets its budget error, even one whose rules are all skipped.
	// With budget left, every order gives the same answer.
	return p.root.pass(ctx, obj, &budget) && budget > 0
}

func (n *celNode) pass(ctx context.Context, obj any, budget *int64) bool {
	if n == nil || obj == nil {
		return true
	}
	if n.compiled {
		if *budget <= 0 {
			return false
		}
		if len(n.programs) > 0 {
			act := &celActivation{self: common.UnstructuredToVal(obj, n.schema)}
			for _, prog := range n.programs {
				res, details, err := prog.ContextEval(ctx, act)
				if details == nil {
					return false
				}
				cost := details.ActualCost()
				if cost == nil || *cost > math.MaxInt64 || int64(*cost) > *budget {
					return false
				}
				*budget -= int64(*cost)
				if err != nil || res != types.True {
					return false
				}
			}
		}
	}
	switch obj := obj.(type) {
	case []any:
		if n.items != nil {
			for _, e := range obj {
				if !n.items.pass(ctx, e, budget) {
					return false
				}
			}
		}
	case map[string]any:
		if n.addl != nil {
			for _, v := range obj {
				if !n.addl.pass(ctx, v, budget) {
					return false
				}
			}
		}
		if n.props != nil {
			for k, v := range obj {
				if c := n.props[k]; c != nil && !c.pass(ctx, v, budget) {
					return false
				}
			}
		}
	}
	return true
}

// celActivation binds self, as the validator's activation without an old
// value does.
type celActivation struct{ self any }

func (a *celActivation) ResolveName(name string) (any, bool) {
	if name == cel.ScopedVarName {
		return a.self, true
	}
	return nil, false
}

func (a *celActivation) Parent() interpreter.Activation { return nil }
