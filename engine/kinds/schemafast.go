package kinds

import (
	"math"
	"regexp"
	"unicode/utf8"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
)

// fastSchema answers one question about a value, far more cheaply than the
// OpenAPI validator of kube-openapi, which builds eight validators and a
// Result for every node it visits: is the value certainly valid against
// the schema? It is compiled once per schema, and it decides only the
// keywords whose check it makes exactly as the library does (type,
// properties, required, additionalProperties, items, enum of scalars,
// minLength, maxLength, pattern, and the formats of stringFormats and
// int32 and int64 on integers); a node with any other keyword,
// and any value it does not know for sure (null, a number of another Go
// type, a string outside an enum), makes the answer "not sure", and the
// library validates the value as before. A "valid" answer is the
// library's answer, without its errors to make: the errors of an invalid
// object always come from the library.
type fastSchema struct {
	// opaque is set when the schema has a keyword the fast check does not
	// decide: any value here is "not sure".
	opaque bool
	// typ is the schema's one type, or "" for none.
	typ      string
	props    map[string]*fastSchema
	required []string
	// closed is additionalProperties: false; extra is the schema of the
	// additional properties; with neither, other keys are not validated.
	closed bool
	extra  *fastSchema
	items  *fastSchema
	enum   []any // strings, booleans, int64s and float64s
	minLen *int64
	maxLen *int64
	re     *regexp.Regexp
	// format is the check of a string format (stringFormats); int32 is
	// set for an integer of format int32. Any other format is opaque.
	format func(string) bool
	int32  bool
}

// stringFormats are the string formats the fast check decides, by the name
// strfmt's registry normalises them to, with the function the registry
// validates them with (kube-openapi's strfmt registers the same ones). The
// fast check calls them directly: the registry's Validates holds one
// process-wide mutex while it validates, which every status write of every
// kind would otherwise take.
var stringFormats = map[string]func(string) bool{
	"datetime": strfmt.IsDateTime,
	"date":     strfmt.IsDate,
	"duration": strfmt.IsDuration,
	"hostname": strfmt.IsHostname,
	"email":    strfmt.IsEmail,
	"uuid":     strfmt.IsUUID,
	"password": func(string) bool { return true },
}

// compileFormat sets the check of p's format on f; it reports false when
// the fast check does not decide that format on p's type.
func (f *fastSchema) compileFormat(p *spec.SchemaProps) bool {
	if p.Format == "" {
		return true
	}
	if len(p.Type) != 1 {
		return false
	}
	switch p.Type[0] {
	case "string":
		name := strfmt.DefaultNameNormalizer(p.Format)
		check, ok := stringFormats[name]
		if !ok || !strfmt.Default.ContainsName(name) {
			return false
		}
		f.format = check
		return true
	case "integer":
		// The library checks the range of these two alone.
		switch p.Format {
		case "int64":
			return true
		case "int32":
			f.int32 = true
			return true
		}
	}
	return false
}

// compileFast compiles s for the fast check; nothing of it is opaque when
// every node uses only the keywords it decides.
func compileFast(s *spec.Schema) *fastSchema {
	f := &fastSchema{}
	if s == nil {
		return f
	}
	p := &s.SchemaProps
	if p.Ref.String() != "" || len(p.Type) > 1 ||
		p.MultipleOf != nil || p.Maximum != nil || p.Minimum != nil ||
		p.MaxItems != nil || p.MinItems != nil || p.UniqueItems ||
		p.MaxProperties != nil || p.MinProperties != nil ||
		len(p.AllOf) > 0 || len(p.OneOf) > 0 || len(p.AnyOf) > 0 || p.Not != nil ||
		len(p.PatternProperties) > 0 || len(p.Dependencies) > 0 || p.AdditionalItems != nil ||
		p.Items != nil && (p.Items.Schema == nil || len(p.Items.Schemas) > 0) {
		f.opaque = true
		return f
	}
	if len(p.Type) == 1 {
		switch p.Type[0] {
		case "object", "array", "string", "integer", "number", "boolean":
			f.typ = p.Type[0]
		default:
			f.opaque = true
			return f
		}
	}
	for _, e := range p.Enum {
		switch e.(type) {
		case string, bool, int64, float64:
		default:
			f.opaque = true
			return f
		}
	}
	f.enum = p.Enum
	if !f.compileFormat(p) {
		f.opaque = true
		return f
	}
	if p.Pattern != "" {
		re, err := regexp.Compile(p.Pattern)
		if err != nil {
			f.opaque = true
			return f
		}
		f.re = re
	}
	f.minLen, f.maxLen = p.MinLength, p.MaxLength
	f.required = p.Required
	if len(p.Properties) > 0 {
		f.props = make(map[string]*fastSchema, len(p.Properties))
		for k, ps := range p.Properties {
			f.props[k] = compileFast(&ps)
		}
	}
	if ap := p.AdditionalProperties; ap != nil {
		switch {
		case !ap.Allows:
			f.closed = true
		case ap.Schema != nil:
			f.extra = compileFast(ap.Schema)
		}
	}
	if p.Items != nil {
		f.items = compileFast(p.Items.Schema)
	}
	return f
}

// valid reports whether v is certainly valid against the schema: false
// means "not sure", not "invalid".
func (f *fastSchema) valid(v any) bool {
	if f.opaque {
		return false
	}
	switch v := v.(type) {
	case map[string]any:
		if f.typ != "object" && f.typ != "" || f.re != nil || f.minLen != nil || f.maxLen != nil || len(f.enum) > 0 {
			return false
		}
		for _, k := range f.required {
			if _, ok := v[k]; !ok {
				return false
			}
		}
		for k, e := range v {
			if p, ok := f.props[k]; ok {
				if !p.valid(e) {
					return false
				}
				continue
			}
			if f.closed || f.extra != nil && !f.extra.valid(e) {
				return false
			}
		}
		return true
	case []any:
		if f.typ != "array" && f.typ != "" || f.re != nil || f.minLen != nil || f.maxLen != nil || len(f.enum) > 0 {
			return false
		}
		if f.items != nil {
			for _, e := range v {
				if !f.items.valid(e) {
					return false
				}
			}
		}
		return true
	case string:
		if f.typ != "string" && f.typ != "" || !f.inEnum(v) {
			return false
		}
		if f.minLen != nil || f.maxLen != nil {
			n := int64(utf8.RuneCountInString(v))
			if f.minLen != nil && n < *f.minLen || f.maxLen != nil && n > *f.maxLen {
				return false
			}
		}
		return (f.re == nil || f.re.MatchString(v)) && (f.format == nil || f.format(v))
	case bool:
		return (f.typ == "boolean" || f.typ == "") && f.scalar() && f.inEnum(v)
	case int64:
		if f.int32 && (v < math.MinInt32 || v > math.MaxInt32) {
			return false
		}
		return (f.typ == "integer" || f.typ == "number") && f.scalar() && f.inEnum(v)
	case float64:
		return f.typ == "number" && f.scalar() && f.inEnum(v)
	default:
		// null included: the library checks nullable and the enum.
		return false
	}
}

// scalar reports whether the string keywords are absent, so that a
// non-string value is decided by its type and enum alone.
func (f *fastSchema) scalar() bool {
	return f.re == nil && f.minLen == nil && f.maxLen == nil
}

// inEnum reports whether v is one of the enum's values, of the same Go
// type, or whether there is no enum.
func (f *fastSchema) inEnum(v any) bool {
	if len(f.enum) == 0 {
		return true
	}
	for _, e := range f.enum {
		if e == v {
			return true
		}
	}
	return false
}
