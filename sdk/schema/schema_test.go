package schema_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/schema"
)

type base struct {
	Team string `json:"team,omitempty"`
}

type spec struct {
	base
	Name     string            `json:"name" description:"display name" minLength:"1"`
	Size     string            `json:"size" enum:"small,medium,large" default:"small"`
	Replicas *int32            `json:"replicas,omitempty" minimum:"0" maximum:"10"`
	Tags     []string          `json:"tags,omitempty" maxItems:"4"`
	Labels   map[string]string `json:"labels,omitempty"`
	Extra    json.RawMessage   `json:"extra,omitempty"`
	Ratio    float64           `json:"ratio,omitzero"`
	Level    int               `json:"level,omitempty" enum:"1,2,3"`
	hidden   string
	Skipped  string `json:"-"`
}

type status struct {
	State           string     `json:"state"`
	LastProvisioned *time.Time `json:"lastProvisioned,omitempty"`
}

func TestFor(t *testing.T) {
	got := schema.For(spec{})
	want := schema.Props{
		"type":     "object",
		"required": []string{"name", "size"},
		"properties": schema.Props{
			"team":     schema.Props{"type": "string"},
			"name":     schema.Props{"type": "string", "description": "display name", "minLength": int64(1)},
			"size":     schema.Props{"type": "string", "enum": []any{"small", "medium", "large"}, "default": "small"},
			"replicas": schema.Props{"type": "integer", "format": "int32", "minimum": 0.0, "maximum": 10.0},
			"tags":     schema.Props{"type": "array", "items": schema.Props{"type": "string"}, "maxItems": int64(4)},
			"labels":   schema.Props{"type": "object", "additionalProperties": schema.Props{"type": "string"}},
			"extra":    schema.Props{"x-kubernetes-preserve-unknown-fields": true},
			"ratio":    schema.Props{"type": "number"},
			"level":    schema.Props{"type": "integer", "format": "int64", "enum": []any{int64(1), int64(2), int64(3)}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("For(spec) =\n%s\nwant\n%s", g, w)
	}
}

func TestForRefusesWhatJSONCannotHold(t *testing.T) {
	type loop struct {
		Next *loop `json:"next,omitempty"`
	}
	for name, v := range map[string]any{"recursive": loop{}, "func": struct{ F func() }{}, "int keys": map[int]string{}} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "schema: ") {
					t.Fatalf("recovered %v, want a schema: panic", r)
				}
			}()
			schema.For(v)
		})
	}
}

func TestCRD(t *testing.T) {
	crd := schema.CRD(schema.Kind{Group: "example.setpoint.dev", Kind: "Widget", ShortNames: []string{"wd"},
		Spec: spec{}, Status: (*status)(nil), Columns: []string{"State=.status.state"}})
	b, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Metadata struct{ Name string }
		Spec     struct {
			Group, Scope string
			Names        struct{ Plural, Kind string }
			Versions     []struct {
				Name         string
				Subresources map[string]any
				Schema       struct {
					OpenAPIV3Schema struct {
						Required   []string
						Properties map[string]struct {
							Required   []string
							Properties map[string]json.RawMessage
						}
					}
				}
				AdditionalPrinterColumns []struct{ Name, JSONPath string }
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	v := doc.Spec.Versions[0]
	st := v.Schema.OpenAPIV3Schema.Properties["status"]
	if doc.Metadata.Name != "widgets.example.setpoint.dev" || doc.Spec.Scope != "Namespaced" || v.Name != "v1" ||
		v.Subresources["status"] == nil || len(v.AdditionalPrinterColumns) != 2 ||
		!reflect.DeepEqual(v.Schema.OpenAPIV3Schema.Required, []string{"spec"}) {
		t.Fatalf("CRD = %s", b)
	}
	for _, m := range []string{"state", "lastProvisioned", "observedGeneration", "conditions"} {
		if st.Properties[m] == nil {
			t.Errorf("status schema lacks %s: %s", m, b)
		}
	}
	if st.Required != nil {
		t.Errorf("status schema requires %v: the engine writes status before the plugin does", st.Required)
	}
}

func TestYAML(t *testing.T) {
	got := string(schema.YAML(map[string]any{
		"kind":  "Widget",
		"empty": map[string]any{},
		"list":  []any{"a", map[string]any{"x": int64(1), "y": true}, []any{}},
		"odd":   []string{"yes", "1.5", "^[a-z]+$", "two words", ""},
		"n":     2.5,
		"sub":   map[string]any{"deep": map[string]any{"k": nil}},
	}))
	want := `empty: {}
kind: Widget
list:
  - a
  - x: 1
    "y": true
  - []
"n": 2.5
odd:
  - "yes"
  - "1.5"
  - "^[a-z]+$"
  - "two words"
  - ""
sub:
  deep:
    k: null
`
	if got != want {
		t.Fatalf("YAML =\n%s\nwant\n%s", got, want)
	}
}
