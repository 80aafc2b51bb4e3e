package kinds

import (
	"testing"
	"time"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apiserver/pkg/cel/common"
)

// nestedEmbedded returns a schema of depth objects, each an embedded
// resource holding the next under "inner".
func nestedEmbedded(depth int) *structuralschema.Structural {
	s := &structuralschema.Structural{Generic: structuralschema.Generic{Type: "object"}}
	s.XEmbeddedResource = true
	s.Properties = map[string]structuralschema.Structural{"size": {Generic: structuralschema.Generic{Type: "string"}}}
	for range depth - 1 {
		outer := &structuralschema.Structural{Generic: structuralschema.Generic{Type: "object"}}
		outer.XEmbeddedResource = true
		outer.Properties = map[string]structuralschema.Structural{"inner": *s}
		s = outer
	}
	return s
}

// The adapter of nested embedded resources is built in time linear in
// their depth, and each level's embedded view holds what the library's
// does: its own properties plus kind, apiVersion and metadata.
func TestCELSchemaNestedEmbedded(t *testing.T) {
	done := make(chan *celSchema, 1)
	go func() { done <- newCELSchema(nestedEmbedded(60)) }()
	var c *celSchema
	select {
	case c = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the adapter of 60 nested embedded resources took over 10s to build")
	}
	var node common.Schema = c
	for depth := 0; depth < 60; depth++ {
		e := node.WithTypeAndObjectMeta()
		want := model.WithTypeAndObjectMeta(node.(*celSchema).Structural.Structural)
		got := e.Properties()
		if len(got) != len(want.Properties) {
			t.Fatalf("depth %d: %d properties in the embedded view, want %d", depth, len(got), len(want.Properties))
		}
		for k, p := range want.Properties {
			g, ok := got[k]
			if !ok {
				t.Fatalf("depth %d: embedded view lacks %q", depth, k)
			}
			if g.Type() != p.Type {
				t.Errorf("depth %d: %q has type %q, want %q", depth, k, g.Type(), p.Type)
			}
		}
		if meta := got["metadata"].Properties(); meta["name"] == nil || meta["generateName"] == nil {
			t.Fatalf("depth %d: metadata lacks name or generateName", depth)
		}
		if depth < 59 {
			node = got["inner"]
		}
	}
}
