package kinds

import (
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// listNode is the part of a kind's schema that leads to a list of
// x-kubernetes-list-type set or map: the library's check of list sets and
// maps walks the whole object, building a field path at every field, and
// can only report an error at such a list holding elements (a duplicate
// needs two; a map list's element with a key missing, one). listNode
// walks only the fields that lead to one, with no paths, and hands the
// object to the library when it finds such a list that is not empty.
type listNode struct {
	minLen int // 2 for a set, 1 for a map; 0 when not such a list
	props  map[string]*listNode
	items  *listNode
	addl   *listNode
}

// newListNode returns the listNode of s; nil when s has no list set or map.
func newListNode(s *structuralschema.Structural) *listNode {
	if s == nil {
		return nil
	}
	n := &listNode{}
	if s.XListType != nil {
		switch *s.XListType {
		case "set":
			n.minLen = 2
		case "map":
			n.minLen = 1
		}
	}
	n.items = newListNode(s.Items)
	if s.AdditionalProperties != nil {
		n.addl = newListNode(s.AdditionalProperties.Structural)
	}
	for k := range s.Properties {
		p := s.Properties[k]
		if c := newListNode(&p); c != nil {
			if n.props == nil {
				n.props = map[string]*listNode{}
			}
			n.props[k] = c
		}
	}
	if n.minLen == 0 && n.items == nil && n.addl == nil && n.props == nil {
		return nil
	}
	return n
}

// mayFail reports whether the library could find an error in obj: it
// follows the library's walk (arrays into their items, objects into their
// additional properties and properties) and stops at the first list set
// or map long enough to break its rules.
func (n *listNode) mayFail(obj any) bool {
	if n == nil {
		return false
	}
	switch obj := obj.(type) {
	case []any:
		if n.minLen > 0 && len(obj) >= n.minLen {
			return true
		}
		if n.items != nil {
			for _, e := range obj {
				if n.items.mayFail(e) {
					return true
				}
			}
		}
	case map[string]any:
		if n.addl != nil {
			for _, v := range obj {
				if n.addl.mayFail(v) {
					return true
				}
			}
		}
		if n.props != nil {
			for k, v := range obj {
				if c := n.props[k]; c != nil && c.mayFail(v) {
					return true
				}
			}
		}
	}
	return false
}

// listErrors returns the errors of the library's check of list sets and
// maps on obj, skipping the walk when it cannot report any.
func (v *createValidation) listErrors(obj map[string]any) field.ErrorList {
	if !v.lists.mayFail(obj) {
		return nil
	}
	return structurallisttype.ValidateListSetsAndMaps(nil, v.structural, obj)
}
