package kinds

import (
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apiserver/pkg/cel/common"
)

// celSchema is the apiextensions adapter of a structural schema for CEL
// values (model.Structural), with the schemas it hands out built once:
// model.Structural builds a new map of new adapters on every Properties()
// call, and CEL calls it at every field a rule reads. A celSchema is
// read-only once built and shared by concurrent evaluations.
type celSchema struct {
	*model.Structural
	props    map[string]common.Schema
	items    common.Schema
	addl     *celSchemaOrBool
	embedded common.Schema // WithTypeAndObjectMeta, for embedded resources
}

var _ common.Schema = (*celSchema)(nil)

func newCELSchema(s *structuralschema.Structural) *celSchema {
	c := newCELSchemaOnly(s)
	if s.XEmbeddedResource {
		// WithTypeAndObjectMeta of its own result returns that result.
		if w := model.WithTypeAndObjectMeta(s); w == s {
			c.embedded = c
		} else {
			c.embedded = withTypeAndObjectMeta(c, w)
		}
	}
	return c
}

// withTypeAndObjectMeta returns the adapter of w, model.WithTypeAndObjectMeta
// of c's schema: c's own adapters for the properties the two share (w holds
// copies of them), new ones for kind, apiVersion and metadata. Building
// w's whole subtree again would double the work at every level of nested
// embedded resources: 2^depth adapters at a kind's registration.
func withTypeAndObjectMeta(c *celSchema, w *structuralschema.Structural) *celSchema {
	e := &celSchema{Structural: &model.Structural{Structural: w}, addl: c.addl}
	e.props = make(map[string]common.Schema, len(w.Properties))
	for k := range w.Properties {
		switch k {
		case "kind", "apiVersion", "metadata":
			prop := w.Properties[k]
			e.props[k] = newCELSchema(&prop)
		default:
			e.props[k] = c.props[k]
		}
	}
	e.embedded = e
	return e
}

// newCELSchemaOnly is newCELSchema but for the embedded-resource schema.
func newCELSchemaOnly(s *structuralschema.Structural) *celSchema {
	c := &celSchema{Structural: &model.Structural{Structural: s}}
	if s.Properties != nil {
		c.props = make(map[string]common.Schema, len(s.Properties))
		for k := range s.Properties {
			prop := s.Properties[k]
			c.props[k] = newCELSchema(&prop)
		}
	}
	if s.Items != nil {
		c.items = newCELSchema(s.Items)
	}
	if s.AdditionalProperties != nil {
		a := &celSchemaOrBool{StructuralOrBool: &model.StructuralOrBool{StructuralOrBool: s.AdditionalProperties}}
		if s.AdditionalProperties.Structural != nil {
			a.schema = newCELSchema(s.AdditionalProperties.Structural)
		}
		c.addl = a
	}
	return c
}

func (c *celSchema) Properties() map[string]common.Schema { return c.props }

func (c *celSchema) Items() common.Schema { return c.items }

func (c *celSchema) AdditionalProperties() common.SchemaOrBool {
	if c.addl == nil {
		return nil
	}
	return c.addl
}

func (c *celSchema) WithTypeAndObjectMeta() common.Schema {
	if c.embedded != nil {
		return c.embedded
	}
	return c.Structural.WithTypeAndObjectMeta()
}

// celSchemaOrBool is model.StructuralOrBool with its schema built once.
type celSchemaOrBool struct {
	*model.StructuralOrBool
	schema common.Schema
}

func (c *celSchemaOrBool) Schema() common.Schema { return c.schema }
