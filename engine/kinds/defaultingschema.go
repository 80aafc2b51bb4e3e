package kinds

import (
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// defaultingSchema returns the part of s that defaulting needs: the nodes
// with a default and the paths to them, nil when s has no default at all.
//
// structuraldefaulting.Default walks every property of the schema for every
// object it visits (copying each one) to find those with a default, and
// descends into every field of the object: a list of 300,000 empty objects
// against 1000 properties took minutes, though no property had a default.
// Defaulting with this skeleton does exactly what defaulting with s does (a
// node without defaults below it does nothing: it has no default to set, and
// a null it would replace with its default it replaces with null), at a cost
// that follows the defaults. Built once per kind version.
func defaultingSchema(s *structuralschema.Structural) *structuralschema.Structural {
	if s == nil {
		return nil
	}
	c := *s
	keep := s.Default.Object != nil
	c.Items = defaultingSchema(s.Items)
	keep = keep || c.Items != nil
	if s.AdditionalProperties != nil {
		if ap := defaultingSchema(s.AdditionalProperties.Structural); ap != nil {
			c.AdditionalProperties = &structuralschema.StructuralOrBool{Structural: ap, Bool: s.AdditionalProperties.Bool}
			keep = true
		} else {
			c.AdditionalProperties = nil
		}
	}
	if len(s.Properties) > 0 {
		if s.AdditionalProperties != nil {
			// Not structural (properties and additionalProperties are
			// exclusive), but then a dropped property would be defaulted
			// as an additional one: keep them all.
			return s
		}
		c.Properties = nil
		for k, p := range s.Properties {
			if d := defaultingSchema(&p); d != nil {
				if c.Properties == nil {
					c.Properties = map[string]structuralschema.Structural{}
				}
				c.Properties[k] = *d
			}
		}
		keep = keep || c.Properties != nil
	}
	if !keep {
		return nil
	}
	return &c
}
