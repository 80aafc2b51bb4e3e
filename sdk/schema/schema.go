package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Props is one OpenAPI v3 schema, as the CRD carries it.
type Props = map[string]any

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// For returns the schema of v's type (v may be a value or a nil pointer of
// the type). It panics on a type JSON cannot encode (a channel, a func), a
// programming error found the first time the generator runs.
func For(v any) Props {
	return of(reflect.TypeOf(v), map[reflect.Type]bool{})
}

func of(t reflect.Type, seen map[reflect.Type]bool) Props {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return Props{"type": "string", "format": "date-time"}
	case t == rawType || t.Name() == "RawJSON" && t.Kind() == reflect.Slice:
		return Props{"x-kubernetes-preserve-unknown-fields": true}
	}
	switch t.Kind() {
	case reflect.String:
		return Props{"type": "string"}
	case reflect.Bool:
		return Props{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64, reflect.Uint32:
		return Props{"type": "integer", "format": "int64"}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16:
		return Props{"type": "integer", "format": "int32"}
	case reflect.Float32, reflect.Float64:
		return Props{"type": "number"}
	case reflect.Interface:
		return Props{"x-kubernetes-preserve-unknown-fields": true}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return Props{"type": "string", "format": "byte"}
		}
		return Props{"type": "array", "items": of(t.Elem(), seen)}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic(fmt.Sprintf("schema: map key of %s is not a string", t))
		}
		return Props{"type": "object", "additionalProperties": of(t.Elem(), seen)}
	case reflect.Struct:
		if seen[t] {
			panic(fmt.Sprintf("schema: %s refers to itself; a CRD schema cannot", t))
		}
		seen[t] = true
		defer delete(seen, t)
		p := Props{"type": "object"}
		props := Props{}
		var required []string
		fields(t, seen, props, &required)
		if len(props) > 0 {
			p["properties"] = props
		}
		if len(required) > 0 {
			p["required"] = required
		}
		return p
	}
	panic(fmt.Sprintf("schema: %s has no JSON schema", t))
}

// fields adds the members of struct t to props, inlining embedded structs
// as encoding/json does.
func fields(t reflect.Type, seen map[reflect.Type]bool, props Props, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				fields(ft, seen, props, required)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		p := of(f.Type, seen)
		if err := constrain(p, f.Tag); err != nil {
			panic(fmt.Sprintf("schema: %s.%s: %v", t, f.Name, err))
		}
		props[name] = p
		optional := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		if !optional && f.Type.Kind() != reflect.Pointer {
			*required = append(*required, name)
		}
	}
}

// constrain applies the struct tags of one member to its schema.
func constrain(p Props, tag reflect.StructTag) error {
	if d, ok := tag.Lookup("description"); ok {
		p["description"] = d
	}
	if e, ok := tag.Lookup("enum"); ok {
		var vals []any
		for v := range strings.SplitSeq(e, ",") {
			vals = append(vals, scalar(p, v))
		}
		p["enum"] = vals
	}
	for _, k := range []string{"format", "pattern"} {
		if v, ok := tag.Lookup(k); ok {
			p[k] = v
		}
	}
	for _, k := range []string{"minimum", "maximum"} {
		if v, ok := tag.Lookup(k); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("%s %q is not a number", k, v)
			}
			p[k] = n
		}
	}
	for _, k := range []string{"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"} {
		if v, ok := tag.Lookup(k); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("%s %q is not a count", k, v)
			}
			p[k] = n
		}
	}
	if v, ok := tag.Lookup("default"); ok {
		var d any
		if err := json.Unmarshal([]byte(v), &d); err != nil {
			d = v // a bare string
		}
		p["default"] = d
	}
	return nil
}

// scalar converts an enum value to the member's type.
func scalar(p Props, v string) any {
	switch p["type"] {
	case "integer":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	case "number":
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			return n
		}
	case "boolean":
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return v
}
