package testsupport

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// CRD describes an apiextensions.k8s.io/v1 CustomResourceDefinition with
// one served and stored version, or the served Versions. The zero values
// of its optional fields get defaults: group example.setpoint.dev, version
// v1, Namespaced scope, plural and singular from Kind, and a schema whose
// spec and status keep unknown fields.
type CRD struct {
	Group    string // default "example.setpoint.dev"
	Version  string // default "v1"
	Kind     string // required
	Plural   string // default: Kind in lower case with an "s"
	Singular string // default: Kind in lower case
	Scope    string // "Namespaced" (default) or "Cluster"

	ShortNames []string
	// Status turns on the status subresource.
	Status bool
	// Scale is the scale subresource, as JSON or YAML.
	Scale string
	// SelectableFields are the JSON paths of the version's
	// selectableFields.
	SelectableFields []string
	// Schema is the version's openAPIV3Schema, as JSON or YAML. Empty, it
	// is an object whose spec and status keep unknown fields.
	Schema string
	// Columns are the version's additionalPrinterColumns, as a JSON or
	// YAML list.
	Columns string
	// Versions, when given, are the CRD's versions in place of Version,
	// each served with the subresources, selectable fields and columns
	// above.
	Versions []Version
}

// Version is one served version of a CRD with several.
type Version struct {
	Name string
	// Storage marks the version objects are stored at.
	Storage bool
	// Schema is the version's openAPIV3Schema; empty, it is the CRD's.
	Schema string
}

// PreserveSpecAndStatus is the default schema: spec and status are objects
// that keep unknown fields.
const PreserveSpecAndStatus = `{"type":"object","properties":{
 "spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
 "status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}`

// Name returns the CRD's metadata.name, <plural>.<group>.
func (c CRD) Name() string { return c.plural() + "." + c.group() }

func (c CRD) group() string   { return or(c.Group, "example.setpoint.dev") }
func (c CRD) version() string { return or(c.Version, "v1") }
func (c CRD) plural() string  { return or(c.Plural, strings.ToLower(c.Kind)+"s") }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Object returns the CRD as the map JSON decoding gives. It panics when
// Kind is empty or Schema or Columns do not parse: a test's own constant
// is wrong.
func (c CRD) Object() map[string]any {
	if c.Kind == "" {
		panic("testsupport: CRD without a Kind")
	}
	names := map[string]any{
		"plural":   c.plural(),
		"singular": or(c.Singular, strings.ToLower(c.Kind)),
		"kind":     c.Kind,
		"listKind": c.Kind + "List",
	}
	if len(c.ShortNames) > 0 {
		names["shortNames"] = toAny(c.ShortNames)
	}
	versions := c.Versions
	if len(versions) == 0 {
		versions = []Version{{Name: c.version(), Storage: true}}
	}
	out := make([]any, len(versions))
	for i, v := range versions {
		out[i] = c.versionObject(v)
	}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": c.Name()},
		"spec": map[string]any{
			"group":    c.group(),
			"scope":    or(c.Scope, "Namespaced"),
			"names":    names,
			"versions": out,
		},
	}
}

// versionObject returns the entry of spec.versions of v.
func (c CRD) versionObject(v Version) map[string]any {
	version := map[string]any{
		"name":    v.Name,
		"served":  true,
		"storage": v.Storage,
		"schema":  map[string]any{"openAPIV3Schema": parse("Schema", or(v.Schema, or(c.Schema, PreserveSpecAndStatus)))},
	}
	if c.Status || c.Scale != "" {
		sub := map[string]any{}
		if c.Status {
			sub["status"] = map[string]any{}
		}
		if c.Scale != "" {
			sub["scale"] = parse("Scale", c.Scale)
		}
		version["subresources"] = sub
	}
	if len(c.SelectableFields) > 0 {
		fields := make([]any, len(c.SelectableFields))
		for i, f := range c.SelectableFields {
			fields[i] = map[string]any{"jsonPath": f}
		}
		version["selectableFields"] = fields
	}
	if c.Columns != "" {
		version["additionalPrinterColumns"] = parse("Columns", c.Columns)
	}
	return version
}

// JSON returns the CRD's JSON, which kubectl also reads as YAML.
func (c CRD) JSON() []byte {
	b, err := json.Marshal(c.Object())
	if err != nil {
		panic(fmt.Sprintf("testsupport: %v", err))
	}
	return b
}

// String returns the CRD's JSON as a string.
func (c CRD) String() string { return string(c.JSON()) }

// parse decodes a JSON or YAML value of a CRD field.
func parse(field, text string) any {
	var v any
	if json.Unmarshal([]byte(text), &v) == nil {
		return v
	}
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		panic(fmt.Sprintf("testsupport: CRD.%s: %v", field, err))
	}
	return v
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Unstructured returns the CRD as an object to create through a client or
// the engine.
func (c CRD) Unstructured() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: c.Object()}
}
